def version():
    return (2, 21, 5)
