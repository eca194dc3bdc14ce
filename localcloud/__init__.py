"""Run this repo's Pulumi program without the Pulumi CLI or an AWS account (for now: a mocked preview)."""

from __future__ import annotations
