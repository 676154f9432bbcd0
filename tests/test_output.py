"""Structured output (`Agent(output_type=...)`): the final answer is validated against a type.

Engine parity for the same scripts lives in tests/test_engines.py; here: the schema the model
is offered, the verdicts, a durable run started by a raw client (which gets the value as
JSON), and LiteLLM over real HTTP answering through the `final_result` tool.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).parent))
from vendor_server import Reply, VendorServer  # noqa: E402

import rein  # noqa: E402
from rein import Agent, Completion, LiteLLMProvider, LoopConfig, Message, MockProvider, ToolCall  # noqa: E402
from rein.blueprint.output import OutputSpec  # noqa: E402
from rein.testing import full_result  # noqa: E402
from tests.support.providers import RecordingProvider  # noqa: E402


class Address(BaseModel):
    city: str
    country: Literal["FR", "DE", "IT"]


class Person(BaseModel):
    name: str
    age: int = Field(ge=0)
    address: Address


GOOD = {"name": "Ada", "age": 36, "address": {"city": "Paris", "country": "FR"}}
BAD = {"name": "Ada", "age": -1, "address": {"city": "Paris", "country": "UK"}}


def final(cid: str, arguments: dict) -> list[ToolCall]:
    return [ToolCall(id=cid, name="final_result", arguments=arguments)]


# --------------------------------------------------------------------------- the spec


def test_the_final_tool_offers_the_models_schema():
    spec = OutputSpec(Person).tool_spec()
    assert spec.name == "final_result"
    assert spec.parameters == Person.model_json_schema()


def test_a_type_that_is_not_an_object_is_wrapped():
    spec = OutputSpec(list[Address])
    params = spec.tool_spec().parameters
    assert params["type"] == "object" and params["required"] == ["response"]
    assert params["properties"]["response"]["type"] == "array"
    assert "Address" in params["$defs"]  # the nested definitions stay where $ref finds them
    checked = spec.check(Completion(message=Message(role="assistant", tool_calls=final("c", {
        "response": [{"city": "Rome", "country": "IT"}]})), finish_reason="tool_calls"))
    assert checked.output is not None and checked.output.error is None
    assert spec.rebuild(checked.output.data_json) == [Address(city="Rome", country="IT")]


def test_verdicts_name_every_problem():
    spec = OutputSpec(Person)
    bad = spec.check(Completion(message=Message(role="assistant", tool_calls=final("c", BAD)), finish_reason="tool_calls"))
    assert bad.output.tool_call_id == "c" and bad.output.data_json is None
    assert "age" in bad.output.error and "address.country" in bad.output.error
    text = spec.check(Completion(message=Message(role="assistant", content="Ada, 36, Paris"), finish_reason="stop"))
    assert text.output.tool_call_id is None and "final_result" in text.output.error
    fenced = "```json\n" + Person.model_validate(GOOD).model_dump_json() + "\n```"
    ok = spec.check(Completion(message=Message(role="assistant", content=fenced), finish_reason="stop"))
    assert spec.rebuild(ok.output.data_json) == Person.model_validate(GOOD)
    other = Completion(message=Message(role="assistant", tool_calls=[ToolCall(id="x", name="add", arguments={})]),
                       finish_reason="tool_calls")
    assert spec.check(other).output is None  # an ordinary tool round


def test_str_output_takes_the_text_as_it_is():
    spec = OutputSpec(str)
    for text in ("42", "plain words"):
        checked = spec.check(Completion(message=Message(role="assistant", content=text), finish_reason="stop"))
        assert spec.rebuild(checked.output.data_json) == text
    via_tool = spec.check(Completion(message=Message(role="assistant", tool_calls=final("c", {"response": "x"})),
                                     finish_reason="tool_calls"))
    assert spec.rebuild(via_tool.output.data_json) == "x"


def test_output_type_clashing_with_a_tool_is_refused():
    def final_result(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="final_result"):
        Agent(provider=MockProvider([]), tools=[final_result], output_type=Person)


async def test_local_run_corrects_one_invalid_answer():
    provider = RecordingProvider([final("c1", BAD), final("c2", GOOD)])
    agent = Agent(provider=provider, output_type=Person, engine="local")
    result = await agent.arun("Who is Ada?")
    assert result.data == Person.model_validate(GOOD)
    assert result.output == Person.model_validate(GOOD).model_dump_json()
    # The model saw the final tool, and on its second call the verdict on its first answer.
    assert [t.name for t in provider.offered[0]] == ["final_result"]
    feedback = provider.seen[1][-1]
    assert feedback.role == "tool" and feedback.tool_call_id == "c1" and "address.country" in feedback.content


# --------------------------------------------------------------------------- durable


async def test_durable_run_carries_the_value_as_json(env, ids):
    tq, wf_id = ids
    provider = RecordingProvider([final("c1", BAD), final("c2", GOOD)])
    agent = Agent(provider=provider, output_type=Person, name="people")
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "people", "prompt": "Who is Ada?"}, id=wf_id, task_queue=tq
        )
        result = await full_result(handle)
    assert isinstance(result, dict)  # a raw client gets plain JSON
    assert result["data"] == GOOD
    assert (result["status"], result["stop_reason"]) == ("done", "done")
    messages = result["session"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert "age" in messages[2]["content"] and messages[4]["content"] == "Final result accepted."
    assert [s["is_error"] for s in result["steps"]] == [True, None]
    assert "address.country" in provider.seen[1][-1].content


async def test_durable_run_ends_when_retries_are_exhausted(env, ids):
    tq, wf_id = ids
    agent = Agent(provider=MockProvider([final("c1", BAD), "Ada is 36", final("c3", GOOD)]), output_type=Person,
                  name="people-strict", config=LoopConfig(output_retries=1))
    async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
        handle = await env.client.start_workflow(
            "AgentWorkflow", {"agent": "people-strict", "prompt": "Who?"}, id=wf_id, task_queue=tq
        )
        result = await full_result(handle)
    assert result["stop_reason"] == "invalid_output" and result["data"] is None
    assert result["session"]["messages"][-1]["role"] == "user"  # the last verdict, never answered


async def test_litellm_answers_through_the_final_tool_over_http(env, ids):
    tq, wf_id = ids
    with VendorServer() as srv:
        srv.script([Reply(tool_calls=[("c1", "final_result", BAD)]), Reply(tool_calls=[("c2", "final_result", GOOD)])])
        agent = Agent(
            provider=LiteLLMProvider("openai/gpt-4o", api_base=srv.base_url + "/v1", api_key="sk-test"),
            output_type=Person,
            name=f"people-llm-{uuid.uuid4().hex[:6]}",
        )
        async with rein.create_worker(env.client, agents=[agent], task_queue=tq):
            handle = await env.client.start_workflow(
                "AgentWorkflow", {"agent": agent.name, "prompt": "Who?"}, id=wf_id, task_queue=tq
            )
            result = await full_result(handle)
        first, second = srv.requests[0].body, srv.requests[1].body
    assert result["data"] == GOOD
    assert [t["function"]["name"] for t in first["tools"]] == ["final_result"]
    assert first["tools"][0]["function"]["parameters"] == Person.model_json_schema()
    assert second["messages"][-1]["role"] == "tool" and "age" in second["messages"][-1]["content"]
