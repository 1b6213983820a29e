"""Estimators of normalizing constants, one module per family; the functions are
``jaxz.smc``, ``jaxz.ais``, ... (re-exported there, not here, so that
``jaxz.estimators.smc`` is the module and its ``SMCInfo`` etc. resolve).

- ``importance`` (importance, sir), ``rejection``, ``mixture_importance``
- ``ais`` (ais, raise_), ``smc`` (assembled from ``smc_engine``, ``smc_schedules``,
  ``smc_mutations``; ``pilot`` for pilot-and-replay), ``particle_filter``, ``twisted``
- ``arm``, ``rts`` (rts, rts_estimates), ``mbar``, ``sgais`` (sgais, stream, sgais_defaults)
- ``nested`` (nested_smc: nested sampling as SMC, standard or waste-free; its moves in
  ``nested_moves``), ``nested_importance``
  (importance sampling from its levels' Gaussians)
"""
