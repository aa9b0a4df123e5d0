import os as _os

cuda = _os.environ.get("DDPDOCTOR_FAKE_TORCH_CUDA", "12.1")
hip = None
__version__ = "2.5.1+cu" + cuda.replace(".", "") if cuda else "2.5.1+cpu"
git_version = "0" * 40
