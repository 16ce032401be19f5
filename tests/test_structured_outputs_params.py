import pytest

from autoglm.errors import InvalidRequestError
from autoglm.sampling_params import SamplingParams
from autoglm.structured_outputs import StructuredOutputsParams


def test_exactly_one_constraint_is_required():
    with pytest.raises(InvalidRequestError, match="exactly one of json, json_object, regex, choice, grammar; got none"):
        StructuredOutputsParams()
    with pytest.raises(InvalidRequestError, match="got regex, choice"):
        StructuredOutputsParams(regex="a+", choice=["a"])


def test_json_text_is_parsed_and_keys_do_not_depend_on_order():
    a = StructuredOutputsParams(json='{"type": "object", "required": ["x"]}')
    b = StructuredOutputsParams(json={"required": ["x"], "type": "object"})
    assert a.json == b.json and a.cache_key() == b.cache_key()
    assert a.kind == "json"


@pytest.mark.parametrize("kwargs, message", [
    ({"json": "{not json"}, "not valid JSON"),
    ({"json": [1, 2]}, "must be a JSON schema"),
    ({"choice": []}, "non-empty list"),
    ({"choice": ["a", ""]}, "non-empty list"),
    ({"regex": ""}, "regex must be a non-empty string"),
])
def test_bad_constraints_name_the_field(kwargs, message):
    with pytest.raises(InvalidRequestError, match=message):
        StructuredOutputsParams(**kwargs)


def test_kinds_have_distinct_keys():
    keys = {StructuredOutputsParams(choice=["a"]).cache_key(), StructuredOutputsParams(regex="a").cache_key(),
            StructuredOutputsParams(grammar="a").cache_key(), StructuredOutputsParams(json_object=True).cache_key()}
    assert len(keys) == 4


def test_sampling_params_refuses_other_types():
    with pytest.raises(InvalidRequestError, match="structured_outputs must be a StructuredOutputsParams"):
        SamplingParams(structured_outputs={"regex": "a"})
    assert SamplingParams(structured_outputs=StructuredOutputsParams(regex="a")).structured_outputs.kind == "regex"
