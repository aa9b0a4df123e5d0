"""ddpdoctor/pipeline"""
