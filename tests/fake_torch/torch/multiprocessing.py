def get_sharing_strategy():
    return "file_descriptor"
