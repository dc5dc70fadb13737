"""Building the model of a config's spec: here, or served (``runs_in``); the facts of a
model that only its server knows."""

from __future__ import annotations

from typing import Any

from intrabench.interfaces import Model

#: a model spec of a run config (intrabench.config.ModelSpec: not imported, the config
#: imports this module)
ModelSpec = Any

#: facts of models described by their servers, by (name, runs_in), for this process
_DESCRIBED: dict[tuple[str, str], dict[str, Any]] = {}


def build_model(spec: ModelSpec) -> Model:
    """The model of ``spec``: built here, or its :class:`~.client.ServedModel` when the spec
    says ``runs_in``.

    Args:
        spec: A config's model entry (:class:`intrabench.config.ModelSpec`): its registry
            name, its build parameters and, optionally, ``runs_in``.

    Returns:
        The model, not yet prepared; a served one starts its server on first use.
    """
    from intrabench import registry

    runs_in = getattr(spec, "runs_in", None)
    if runs_in is None:
        return registry.models.create(spec.name, spec.build_params)
    from intrabench.serving.client import served_class

    return served_class(spec.name, model_facts(spec))(spec.build_params, runs_in)


def model_facts(spec: ModelSpec) -> dict[str, Any]:
    """``dimension``, ``accepts``, ``licence`` and ``forward_frees_cpu`` of ``spec``'s model:
    from its class when it is registered here (its adapter imports without its libraries),
    else from the server's own description (:func:`describe_served`).

    Args:
        spec: A config's model entry whose name the registry knows (a model known only to
            its server is registered first by :func:`register_served`).

    Returns:
        The facts: ``dimension`` (2 or 3), ``accepts`` (sorted prompt kinds for these
        parameters), ``licence`` and ``forward_frees_cpu`` (bool); for a served class, the
        facts its server gave.
    """
    from intrabench import registry
    from intrabench.interfaces import model_accepts
    from intrabench.serving.client import ServedModel

    cls = registry.models.get(spec.name)
    if issubclass(cls, ServedModel):
        return dict(cls.served_facts)
    params = dict(spec.build_params)
    return {
        "dimension": int(cls.dimension),
        "accepts": sorted(model_accepts(cls, params)),
        "licence": str(cls.licence),
        "forward_frees_cpu": bool(cls.forward_frees_cpu(params)),
    }


def register_served(spec: ModelSpec) -> None:
    """Make ``spec``'s model known to the registry when only its server knows it (a model
    installed in another environment alone): its server is started once and asked.

    Args:
        spec: A config's model entry with ``runs_in``; nothing is done when its name is
            already registered.

    Raises:
        ConfigError: The server cannot be started or its hello has no model facts.
    """
    from intrabench import registry
    from intrabench.serving.client import served_class

    if spec.name in registry.models.names():
        return
    registry.models.register(served_class(spec.name, describe_served(spec)))


def describe_served(spec: ModelSpec) -> dict[str, Any]:
    """The served model's facts from its server's hello (the server is started and stopped).

    The facts are kept for this process by (name, ``runs_in``): the server is asked once.

    Args:
        spec: A config's model entry with ``runs_in``.

    Returns:
        The hello's ``model`` object: at least ``name``, ``dimension`` and ``accepts``.

    Raises:
        ConfigError: The server cannot be started or reached, or its hello has no model
            facts.
    """
    from intrabench.errors import ConfigError
    from intrabench.serving.connection import ModelServerError, ServerConnection

    runs_in = spec.runs_in
    identity = (spec.name, runs_in.model_dump_json())
    if identity not in _DESCRIBED:
        try:
            connection = ServerConnection(spec.name, dict(spec.params), runs_in)
        except ModelServerError as error:
            raise ConfigError(
                f"models: {spec.key} is not installed here, and its server "
                f"cannot say what it takes: {error}"
            ) from None
        try:
            facts = connection.hello.get("model")
        finally:
            connection.close()
        if not isinstance(facts, dict) or not {"name", "dimension", "accepts"} <= set(facts):
            raise ConfigError(f"models: {spec.key}: its server's hello has no model facts")
        _DESCRIBED[identity] = facts
    return _DESCRIBED[identity]
