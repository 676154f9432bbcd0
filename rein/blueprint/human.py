"""`ask_human`: the opt-in built-in tool through which the model asks a person a question.

Its calls are never executed: the run interrupts with `need_input`, and the
person's answer (the `answer` signal, or `resume(answer=...)`) becomes the
tool result the model sees.
"""

from __future__ import annotations

from rein.blueprint.tools import Tool
from rein.core.machine import ASK_HUMAN


def _ask_human(question: str) -> str:
    """Ask a person a question and wait for the answer. Use it when you need information
    or a decision that only a human can give.

    Args:
        question: The question, complete and self-contained.
    """
    raise RuntimeError("ask_human is answered by a person, not executed")


ask_human = Tool.from_function(_ask_human, name=ASK_HUMAN)
ask_human.asks_human = True
