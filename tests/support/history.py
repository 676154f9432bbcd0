"""A run's history as what it says: every payload decoded, not the base64 or ciphertext stored.

Secret and content checks go through here, so a secret that lands in any payload (workflow
input, activity input or result, summary, signal, query-free marker result, failure details,
search attribute) is found whatever the codec or external storage did to it. Searching
`history.to_json()` alone misses them: payloads are base64 there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from google.protobuf.message import Message as ProtoMessage
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.converter import DataConverter


def payloads_in(message: Any, skip: tuple[str, ...] = ()) -> Iterator[Payload]:
    """Every Payload inside a history (WorkflowHistory) or protobuf message, as stored, recursively.

    `skip`: field names not to descend into (e.g. "search_attributes", which the server indexes
    and so are never encrypted). A marker's SDK bookkeeping (patch ids, a local activity's
    seq/attempt/type) is plain JSON the SDK writes; only a marker's `result` is user data.
    """
    if isinstance(message, WorkflowHistory):
        for event in message.events:
            marker = event.marker_recorded_event_attributes
            if marker.marker_name:
                if "result" in marker.details:
                    yield from payloads_in(marker.details["result"], skip)
                continue
            yield from payloads_in(event, skip)
        return
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.name in skip or field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items: Any = value.values()
        elif field.is_repeated:
            items = value
        else:
            items = [value]
        for item in items:
            if isinstance(item, ProtoMessage):
                yield from payloads_in(item, skip)


def history_from_json(workflow_id: str, history: str | dict) -> WorkflowHistory:
    """A history as the `temporal workflow show -o json` CLI prints it, as the SDK's WorkflowHistory."""
    return WorkflowHistory.from_json(workflow_id, history)


async def decoded_values(message: Any, converter: DataConverter | None = None) -> list[Any]:
    """Every payload in `message` (a history, event or proto), decoded the way a client reads it.

    `converter` (default: rein's, from the environment) undoes external storage references,
    then the codec, then converts: each value is what the payload holds (dict, list, str, ...).
    """
    if converter is None:
        from rein.temporal.converter import rein_data_converter

        converter = rein_data_converter()
    return [value for payload in payloads_in(message) for value in await converter.decode([payload])]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if hasattr(value, "model_dump_json"):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False, default=str)


async def decoded_texts(message: Any, converter: DataConverter | None = None) -> list[str]:
    """`decoded_values`, each as text (strings as they are, anything else as JSON)."""
    return [_text(value) for value in await decoded_values(message, converter)]


async def history_text(history: WorkflowHistory, converter: DataConverter | None = None) -> str:
    """Everything a history says as one text: its decoded payloads, and its non-payload fields
    (failure messages, stack traces, identities) from the history JSON."""
    return "\n".join([*await decoded_texts(history, converter), history.to_json()])


async def assert_secret_absent(
    history: WorkflowHistory,
    secrets: str | Sequence[str],
    converter: DataConverter | None = None,
    *,
    present: str | Sequence[str] = (),
) -> str:
    """Fail if any secret is in any decoded payload or field of `history`; return the text searched.

    `present`: text the history must hold (e.g. the run's answer), which proves the decoding
    really reached the payloads rather than searching ciphertext.
    """
    text = await history_text(history, converter)
    for marker in [present] if isinstance(present, str) else present:
        assert marker in text, f"{marker!r} is not in the decoded history: the decoder did not reach the payloads"
    for secret in [secrets] if isinstance(secrets, str) else secrets:
        if secret in text:
            where = [
                EventType.Name(event.event_type)
                for event in history.events
                if any(secret in t for t in await decoded_texts(event, converter)) or secret in str(event)
            ]
            raise AssertionError(f"secret {secret[:6]}... found in the history, in events {where}")
    return text


async def decode_payload(payload: Payload, converter: DataConverter | None = None) -> Any:
    """One payload (e.g. an event's summary or an activity result) decoded."""
    (value,) = await decoded_values(payload, converter)
    return value


async def summaries(history: WorkflowHistory | Sequence[Any], converter: DataConverter | None = None,
                    activity: str | None = None) -> list[str]:
    """The UI summary of every scheduled activity (of type `activity`, if given), in order."""
    events = history.events if isinstance(history, WorkflowHistory) else history
    return [await decode_payload(event.user_metadata.summary, converter) for event in scheduled(events, activity)]


def scheduled(events: Sequence[Any], activity: str | None = None) -> list:
    """ActivityTaskScheduled events (of the activity type `activity`, if given)."""
    return [
        e
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and (activity is None or e.activity_task_scheduled_event_attributes.activity_type.name == activity)
    ]


def task_failures(events: Sequence[Any]) -> list:
    return [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]


def assert_no_task_failures(events: Sequence[Any] | WorkflowHistory) -> None:
    """No workflow task failed: nothing a client, model or tool sent wedged the run."""
    failed = task_failures(events.events if isinstance(events, WorkflowHistory) else events)
    assert not failed, f"workflow task failed: {failed[0].workflow_task_failed_event_attributes}"


async def history_events(handle: Any) -> list:
    """The events of the run behind a WorkflowHandle, as fetched now."""
    return list((await handle.fetch_history()).events)


def tool_attempts(events: Sequence[Any]) -> list[int]:
    """The attempt number of every start of a `rein.run_tool` activity, in order."""
    tool_ids = {e.event_id for e in scheduled(events, "rein.run_tool")}
    return [
        e.activity_task_started_event_attributes.attempt
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in tool_ids
    ]


async def first_call_result(events: Sequence[Any], converter: DataConverter | None = None) -> dict[str, Any]:
    """The decoded result of a run's first `rein.call_model` (a lean start's FirstReply: agent and reply)."""
    first = scheduled(events, "rein.call_model")[0].event_id
    done = next(e for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
                and e.activity_task_completed_event_attributes.scheduled_event_id == first)
    return await decode_payload(done.activity_task_completed_event_attributes.result.payloads[0], converter)
