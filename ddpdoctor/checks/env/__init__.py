"""ddpdoctor/checks/env"""
