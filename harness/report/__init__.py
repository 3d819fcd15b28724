"""The HTML report of a run: one self-contained file (figures embedded) built with jinja2 and seaborn."""

from dpgym.report.build import write_report

__all__ = ["write_report"]
