"""ddpdoctor/checks/gpu"""
