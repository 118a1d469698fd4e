"""OpenAI Batch: JSONL upload (``files.create``), ``batches.create``, poll, output file.

Each line is ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`` with the
body the sync backend would send; each output line carries the same ``custom_id`` and either a
``response`` (``status_code`` and the chat completion ``body``) or an ``error``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import openai

from skillvc.models.backends.base import CallRequest, CallResult
from skillvc.models.backends.openai_backend import OpenAIBackend
from skillvc.models.batch.base import TAG, SdkBatches, Status
from skillvc.models.executors import CallFailure

ENDPOINT = "/v1/chat/completions"
ENDED = ("completed", "failed", "expired", "cancelled")


class OpenAIBatches(SdkBatches[OpenAIBackend]):
    name = "openai"
    sdk = openai
    sdk_error = openai.OpenAIError

    def line(self, request: CallRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.backend.name,
            "messages": [{"role": m["role"], "content": m["content"]} for m in request.messages],
            **self.backend._params(request),
        }
        return {"custom_id": request.key, "method": "POST", "url": ENDPOINT, "body": body}

    def create(self, requests: Sequence[CallRequest], wave: str) -> str:
        client = self.backend._get_client()
        data = "".join(json.dumps(self.line(r), sort_keys=True) + "\n" for r in requests)
        with self._sdk():
            upload = client.files.create(
                file=(f"{wave}.jsonl", data.encode("utf-8")), purpose="batch"
            )
            batch = client.batches.create(
                input_file_id=upload.id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata={TAG: wave},
            )
        return str(batch.id)

    def status(self, batch_id: str) -> Status:
        with self._sdk():
            batch = self.backend._get_client().batches.retrieve(batch_id)
        counts = batch.request_counts
        return Status(batch.status in ENDED, float(batch.created_at), counts.total if counts else 0)

    def find(self, wave: str, n: int, since: float) -> str | None:
        with self._sdk():
            for batch in self.backend._get_client().batches.list(limit=100):
                if (batch.metadata or {}).get(TAG) == wave:
                    return str(batch.id)
                if batch.created_at < since - 60:  # newest first: older ones cannot be ours
                    break
        return None

    def results(self, batch_id: str) -> dict[str, CallResult | CallFailure]:
        client = self.backend._get_client()
        out: dict[str, CallResult | CallFailure] = {}
        with self._sdk():
            batch = client.batches.retrieve(batch_id)
            for file_id in (batch.output_file_id, batch.error_file_id):
                if file_id:
                    for raw in client.files.content(file_id).text.splitlines():
                        if raw.strip():
                            entry = json.loads(raw)
                            out[str(entry.get("custom_id"))] = self.parse(entry)
        return out

    def parse(self, entry: dict[str, Any]) -> CallResult | CallFailure:
        model = self.backend.model
        response = entry.get("response") or {}
        error = entry.get("error")
        body = response.get("body") or {}
        if error or response.get("status_code") != 200:
            detail = error or body.get("error") or {}
            message = detail.get("message") if isinstance(detail, dict) else str(detail)
            status = response.get("status_code")
            return CallFailure(
                f"{model} batch request failed ({status or 'no response'}): {message}",
                "BatchError",
                False,
                status == 401,
            )
        choices = body.get("choices") or []
        if not choices:
            return CallFailure(f"{model} answered without any choices.", "BatchError", True, False)
        usage = body.get("usage") or {}
        return CallResult(
            text=(choices[0].get("message") or {}).get("content") or "",
            prompt_tokens=usage.get("prompt_tokens") or 0,
            completion_tokens=usage.get("completion_tokens") or 0,
            meta={"finish_reason": choices[0].get("finish_reason"), "batch": True},
            cached_tokens=(usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0,
        )
