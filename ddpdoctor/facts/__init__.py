"""ddpdoctor/facts"""
