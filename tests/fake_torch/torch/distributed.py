def is_available():
    return True


def is_gloo_available():
    return True


def is_nccl_available():
    return True


def is_mpi_available():
    return False
