from evo.contracts.candidate import Candidate, module_literal

SRC = 'PARAMS = {"BLOCK": 64, "num_warps": 4}\nSPACE = {"BLOCK": [64, 128]}\n'


def test_id_is_a_content_hash_of_source_and_params():
    a = Candidate.from_source(SRC)
    b = Candidate(SRC, {"num_warps": 4, "BLOCK": 64})  # key order does not matter
    assert a.id == b.id and a == b and len({a, b}) == 1
    assert a.with_params(BLOCK=128).id != a.id
    assert Candidate(SRC + "\n", a.params).id != a.id


def test_params_default_to_module_params_and_can_be_overridden():
    c = Candidate.from_source(SRC, {"BLOCK": 128})
    assert c.params == {"BLOCK": 128, "num_warps": 4}
    assert c.space() == {"BLOCK": [64, 128]}
    assert c.structure == Candidate.from_source(SRC).structure


def test_module_literal_is_read_without_running_the_module():
    assert module_literal("import os\nos.system('false')\nX = [1, 2]\n", "X") == [1, 2]


def test_a_module_that_does_not_parse_is_still_a_candidate():
    c = Candidate.from_source("def launch(:\n")
    assert c.params == {}


def test_round_trip_through_dict():
    c = Candidate.from_source(SRC)
    assert Candidate.from_dict(c.to_dict()) == c


def test_an_annotated_params_literal_is_read_as_params():
    # `PARAMS: dict = {...}` was read as no PARAMS: its defaults silently ignored
    assert module_literal('PARAMS: dict = {"BLOCK": 64}\n', "PARAMS") == {"BLOCK": 64}
    assert module_literal("PARAMS: dict\n", "PARAMS") is None
