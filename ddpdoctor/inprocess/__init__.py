"""ddpdoctor/inprocess"""
