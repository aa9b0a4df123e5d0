"""ddpdoctor/commands"""
