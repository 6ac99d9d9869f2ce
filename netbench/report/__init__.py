"""HTML reports from ReFrame's JSON run reports, in five steps:

- sessions:   load a run report (and its provenance.json), validated
- provenance: this machine at the end of a session
- sections:   what each section of the page draws, from the cases' records
- plots:      those sections as inline SVG (matplotlib, loaded when drawing)
- page:       the HTML pages (Jinja2): a session, a comparison, the index
- publish:    session folders under reports/, the index and `latest`, and
              publishing after every ReFrame session

The names below are the package's public face (netbench.cli, the tests and
reframe_checks/settings.py use them).  `publish` is the function; the module
is `netbench.report.publish` in sys.modules.
"""

from .page import (case_label, case_rows, comparison_rows, history_for, render_index,
                   render_report)
from .plots import build_sections
from .provenance import collect_provenance
from .publish import (SESSION_FILES, publish, publish_after_session, write_report)
from .sections import CURVE_PLOTS, LEGACY_UNITS, case_record, curve_plot_data, legacy_record
from .sessions import Session, load_session, published_sessions

__all__ = ["CURVE_PLOTS", "LEGACY_UNITS", "SESSION_FILES", "Session", "build_sections",
           "case_label", "case_record", "case_rows", "collect_provenance", "comparison_rows",
           "curve_plot_data", "history_for", "legacy_record", "load_session", "publish",
           "publish_after_session", "published_sessions", "render_index", "render_report",
           "write_report"]
