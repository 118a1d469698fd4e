"""SkillOpt's verifiers registered as skillvc scorers, the way a plugin registers its own.

``livemath`` (LiveMathematicianBench's choice check), ``anls`` (DocVQA), ``officeqa`` (OfficeQA's
exact match with token F1 as the soft score) and ``spreadsheet`` (SpreadsheetBench's cell-level
comparison of the workbooks a rollout wrote with the answer workbooks). SearchQA is scored by
the built-in ``exact`` and ALFWorld by ``reward`` (its environment's success).

``skillvc.tasks`` imports this module, so the names exist wherever task sets and scorers do.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillvc.core.errors import ScorerError
from skillvc.tasks import scorers as base
from skillvc.tasks.scorers import Acted, JudgeFn, Score, register_scorer
from skillvc.tasks.skillopt import verify
from skillvc.tasks.taskset import TaskItem


def _binary(ok: bool, detail: str) -> Score:
    return Score(1.0 if ok else 0.0, 1.0 if ok else 0.0, detail)


@dataclass(frozen=True)
class LiveMathScorer:
    """The label the answer picks (its ``<answer>`` tag or last line) against the correct one;
    the choices come from the item's metadata (as loaded), or its plain ``choices``."""

    name: str = "livemath"

    def score(self, item: TaskItem, output: str) -> Score:
        choices = item.metadata.get("choices")
        if not isinstance(choices, list):
            choices = [{"label": chr(65 + i), "text": t} for i, t in enumerate(item.choices)]
        correct = verify.choice_label(base._need_targets(self.name, item)[0])
        picked = verify.livemath_pick(output or "", choices)
        return _binary(picked == correct, f"picked {picked or 'nothing'}, correct {correct}")


@dataclass(frozen=True)
class AnlsScorer:
    """ANLS of the answer against the item's answers: soft is the ANLS, hard is ANLS >= 0.999."""

    name: str = "anls"

    def score(self, item: TaskItem, output: str) -> Score:
        answer = verify.tagged_or_last_line(output or "")
        value = verify.anls(answer, base._need_targets(self.name, item))
        return Score(1.0 if value >= 0.999 else 0.0, value, f"ANLS {value:.3f} for {answer!r}")


@dataclass(frozen=True)
class OfficeQaScorer:
    """OfficeQA's exact match (hard) and token F1 (soft) of the ``<answer>`` tag's text."""

    name: str = "officeqa"

    def score(self, item: TaskItem, output: str) -> Score:
        answer = verify.tagged(output or "")
        if answer is None:
            return _binary(False, "no <answer> tag")
        best = Score(0.0, 0.0, f"got {answer!r}")
        for gold in base._need_targets(self.name, item):
            exact = verify.officeqa_normalize(answer) == verify.officeqa_normalize(gold)
            soft = verify.officeqa_f1(answer, gold)
            if (exact, soft) > (best.hard == 1.0, best.soft):
                best = Score(1.0 if exact else 0.0, soft, f"got {answer!r}, expected {gold!r}")
        return best


@dataclass(frozen=True)
class SpreadsheetScorer:
    """Each test case's produced workbook (``N_output.xlsx`` in the rollout's files) against its
    answer workbook at the item's answer position: soft is the share of cases that match, hard
    is all of them (SkillOpt's soft and hard)."""

    name: str = "spreadsheet"

    def score(self, item: TaskItem, output: str) -> Score:
        return self.score_acted(item, output, None)

    def score_acted(self, item: TaskItem, output: str, acted: Acted | None) -> Score:
        cases = item.metadata.get("cases")
        if not isinstance(cases, list) or not cases:
            raise ScorerError("The spreadsheet scorer needs an item loaded from SpreadsheetBench.")
        if acted is None:
            return _binary(
                False, "no workbook came back: the rollout did not act (set [tools] code = true)"
            )
        openpyxl = _openpyxl()
        paths = item.fields.get("answer_workbooks")
        passed, first = 0, ""
        for case in cases:
            ok, why = self._case(openpyxl, case, paths, acted, item.metadata)
            passed += ok
            first = first or ("" if ok else f"case {case['no']}: {why}")
        soft = passed / len(cases)
        detail = first or f"{passed}/{len(cases)} cases match"
        return Score(1.0 if passed == len(cases) else 0.0, soft, detail)

    def _case(
        self,
        openpyxl: Any,
        case: Mapping[str, Any],
        paths: Any,
        acted: Acted,
        metadata: Mapping[str, Any],
    ) -> tuple[bool, str]:
        produced = acted.read(case["output"])
        if produced is None:
            entry = acted.files.get(case["output"])
            return False, (
                f"{case['output']} is over the size that comes back to scorers"
                if entry is not None
                else f"{case['output']} was not written"
            )
        answer = self._answer(case, paths)
        try:
            got = openpyxl.load_workbook(io.BytesIO(produced), data_only=True)
        except Exception as exc:
            return False, f"{case['output']} is not a workbook ({type(exc).__name__})"
        expected = openpyxl.load_workbook(io.BytesIO(answer), data_only=True)
        try:
            return verify.compare_workbooks(expected, got, str(metadata.get("answer_position")))
        finally:
            got.close()
            expected.close()

    @staticmethod
    def _answer(case: Mapping[str, Any], paths: Any) -> bytes:
        where = paths.get(case["no"]) if isinstance(paths, Mapping) else None
        if not where:
            raise ScorerError(f"The answer workbook of case {case['no']} is not known.")
        try:
            data = Path(where).read_bytes()
        except OSError as exc:
            raise ScorerError(
                f"The answer workbook {case['answer']} cannot be read ({exc})."
            ) from None
        if hashlib.sha256(data).hexdigest() != case.get("answer_sha256"):
            raise ScorerError(
                f"The answer workbook {case['answer']} changed after the task set loaded.",
                hint="Run again: the task set is read afresh.",
            )
        return data


def _openpyxl() -> Any:
    try:
        import openpyxl
    except ImportError:
        raise ScorerError(
            "The spreadsheet scorer reads workbooks with openpyxl, which is not installed.",
            hint="pip install 'skillvc[spreadsheet]'",
        ) from None
    return openpyxl


def _plain(cls: Any) -> Any:
    def factory(options: Mapping[str, Any], judge: JudgeFn | None) -> Any:
        base._check_options(str(cls.name), options, ())
        return cls()

    return factory


register_scorer("livemath", _plain(LiveMathScorer))
register_scorer("anls", _plain(AnlsScorer))
register_scorer("officeqa", _plain(OfficeQaScorer))
register_scorer("spreadsheet", _plain(SpreadsheetScorer), needs_target=False)
