"""A rank whose connection to a peer ended (Gloo's "Connection closed by peer", NCCL's ncclRemoteError) is labelled
as losing its peer, not as "a NCCL error" with an NCCL_DEBUG fix (seen in round 17's held-out review: a Gloo job)."""
from ddpdoctor.run.section import classify_failure
from ddpdoctor.checks.run import WHY


def test_gloo_closed_by_peer_is_a_lost_peer():
    text = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
            "peer [127.0.0.1]:27055")
    assert classify_failure(text) == "peer-lost"
    assert "NCCL" not in WHY["peer-lost"]


def test_an_nccl_system_error_stays_an_nccl_error():
    text = "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"
    assert classify_failure(text) == "nccl"


def test_an_ordinary_exception_has_no_class():
    assert classify_failure("ValueError: bad batch") is None
