"""The check behind scripts/results/results-provenance.py, split by role so that each rule can be read
(and changed) without the others: the reports and their provenance, the sections and Source
lines of RESULTS.md (the index) and of the write-ups under results/, their Figure lines, their
links, and README's measured figures. The rules themselves are stated once, in the docstring
of scripts/results/results-provenance.py, which RESULTS.md points readers to.

Imports run one way, from the command line down to the reports: cli -> readme -> (measured,
figures); cli -> sections -> (figures -> report_values, links) -> reports."""
