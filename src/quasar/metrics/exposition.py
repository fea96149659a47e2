"""The Prometheus text exposition format, version 0.0.4.

::

    # HELP <name> <help, with \\ and newline escaped>
    # TYPE <name> counter|gauge|histogram|untyped
    <sample name>{<label>="<value, with \\ " and newline escaped>",...} <value>

One HELP and one TYPE line per family, then its samples; the output ends with a
newline. Histogram samples are ``_bucket`` (cumulative, ``le`` last among the labels,
ending with ``+Inf``), ``_sum`` and ``_count``.
"""

from __future__ import annotations

from .registry import MetricFamily, Registry, format_value

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_families(families: list[MetricFamily]) -> str:
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for s in family.samples:
            if s.labels:
                labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in s.labels)
                lines.append(f"{s.name}{{{labels}}} {format_value(s.value)}")
            else:
                lines.append(f"{s.name} {format_value(s.value)}")
    return "\n".join(lines) + "\n" if lines else ""


def render(registry: Registry) -> str:
    """Everything ``registry`` collects, as one text exposition."""
    return render_families(registry.collect())
