"""Hard rows of benchmarks/calibration.py (issue 23): twisted SMC (Base and Twist) on the
twisted-SMC authors' 16x16 Ising models, the LDA toy and the GMRF.

``rows(Row, Problem)`` returns a list of ``Row`` specs (the types of calibration.py, passed
in so that this file does not import it back).
"""


def rows(Row, Problem) -> list:
    return []
