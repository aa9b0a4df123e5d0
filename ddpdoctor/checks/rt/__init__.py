"""ddpdoctor/checks/rt"""
