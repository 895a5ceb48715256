"""Faults (docs/faults.md): the injectable faults of ``--inject FAULT[@WHEN]`` and the
classes of a failed attempt.

* :mod:`.injector`: the :class:`~.injector.Injector` protocol, one object per fault kind
  that parses its ``@WHEN``, checks that an executor can inject it, and arms it on a step's
  processes (a prefix to the argv, an action once the process started, a cleanup), or says
  the executor injects it itself (``kill-worker``);
* :mod:`.kinds`: one file per fault kind, and the registration list of the built-in ones;
* :mod:`.registry`: the injectors by kind, and ``--inject``'s parse and check;
* :mod:`.armed`: the injections of one attempt of one step, as its processes start;
* :mod:`.classify`: the :class:`~cmx_core.providers.recovery.FaultClass` of a failed attempt.

The typed names, :class:`~cmx_core.providers.recovery.FaultKind` and
:class:`~cmx_core.providers.recovery.FaultClass`, live with the recovery records in
:mod:`cmx_core.providers.recovery`, the floor below, since every executor's records carry
them. A new fault is one new file in :mod:`.kinds` plus its line in ``kinds.BUILTIN``.
"""
