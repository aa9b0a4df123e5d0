"""facts.units.runs_text: the one writer of CPU and rank lists (cpuset syntax and prose)."""
from ddpdoctor.facts.units import runs_text


def test_runs_are_collapsed_sorted_and_deduplicated():
    assert runs_text([8, 0, 1, 2, 3, 5, 7, 3]) == "0-3,5,7-8"
    assert runs_text([]) == ""
    assert runs_text([4]) == "4"


def test_prose_keeps_two_neighbours_as_a_list():
    assert runs_text([0, 1, 2, 4, 5, 9], sep=", ") == "0-2, 4-5, 9"
    assert runs_text([0, 1, 2, 4, 5, 9], sep=", ", pairs_as_runs=False) == "0-2, 4, 5, 9"
