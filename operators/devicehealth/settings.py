"""Options of the device-health operator: those of every operator; it has none of its own yet, and
this is where they go."""

from __future__ import annotations

from operators.core.settings import OperatorSettings


class Settings(OperatorSettings):
    pass
