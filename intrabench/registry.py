"""Registries of models, prompters, refiners and datasets, by name.

Components register with a decorator (``@models.register``) or, from a third-party package,
through Python entry points in the groups ``intrabench.models``, ``intrabench.prompters``,
``intrabench.refiners``, ``intrabench.datasets`` and ``intrabench.clickability``. An entry point
may name a class (registered under the entry point's name) or a module (whose decorators
register what it defines).
Built-in components are found by importing every module of the built-in package, so adding a
file is enough; nothing is imported before a registry is first asked. Asking for one built-in
name imports only the module that defines it (:mod:`intrabench.component_index`).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
import pkgutil
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from intrabench.errors import ConfigError, quoted

log = logging.getLogger(__name__)
T = TypeVar("T")


class Registry(Generic[T]):
    """Named component classes of one kind (e.g. all models)."""

    def __init__(self, kind: str, group: str, builtin_packages: tuple[str, ...]) -> None:
        self.kind = kind
        self.group = group
        self._builtin_packages = builtin_packages
        self._classes: dict[str, type[T]] = {}
        self._sources: dict[str, str] = {}
        self._loaded = False

    # -- registration ---------------------------------------------------------------------
    def register(self, cls: type[T] | None = None, *, name: str | None = None):
        """Class decorator: ``@registry.register`` or ``@registry.register(name="x")``.

        Args:
            cls: The class, when used without parentheses.
            name: The registered name (default: the class's ``name``, else its class name);
                the class's ``name`` is set to it when it has none.

        Returns:
            The class itself (or, with ``name`` only, the decorator).

        Raises:
            ValueError: The name is registered by another class, or is a built-in
                component's name.
        """

        def decorate(component: type[T]) -> type[T]:
            key = name or getattr(component, "name", "") or component.__name__
            if not getattr(component, "name", ""):
                component.name = key  # type: ignore[attr-defined]
            existing = self._classes.get(key)
            if existing is not None and existing is not component:
                raise ValueError(f"{self.kind} '{key}' is already registered by {existing!r}")
            builtin = self._builtin_module(key)
            if builtin is not None and component.__module__ != builtin:
                # registered before the built-in module was imported, it would replace the
                # built-in in silence (the built-in's own registration then fails)
                raise ValueError(
                    f"{self.kind} '{key}' is the name of a built-in {self.kind} "
                    f"({builtin}); register {component.__name__} under "
                    "another name"
                )
            self._classes[key] = component
            self._sources[key] = component.__module__
            return component

        return decorate(cls) if cls is not None else decorate

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a component for themselves only).

        Args:
            name: The registered name; an unknown name is ignored.
        """
        self._classes.pop(name, None)
        self._sources.pop(name, None)

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for package_name in self._builtin_packages:
            _import_public_modules(package_name)
        for entry_point in entry_points(group=self.group):
            try:
                loaded = entry_point.load()
            except Exception as error:  # a broken plugin must not break the benchmark
                log.warning("cannot load %s plugin '%s': %s", self.kind, entry_point.name, error)
                continue
            if inspect.isclass(loaded) and entry_point.name not in self._classes:
                self.register(loaded, name=entry_point.name)

    def _builtin_module(self, name: str) -> str | None:
        """The built-in module that defines ``name`` (:mod:`intrabench.component_index`), or
        None when no built-in component has that name."""
        from intrabench.component_index import BUILTIN_MODULES

        return BUILTIN_MODULES.get(self.group, {}).get(name)

    def _import_defining_module(self, name: str) -> bool:
        """Import the built-in module that defines ``name`` (intrabench.component_index);
        whether ``name`` is registered now. Any failure leaves it to the full load."""
        from intrabench.component_index import BUILTIN_MODULES

        module = BUILTIN_MODULES.get(self.group, {}).get(name)
        if module is None:
            return False
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the full load reports what is wrong
            return False
        return name in self._classes

    def _import_moved_out(self, name: str) -> bool:
        """Import the module of a component that left the built-in packages
        (:data:`intrabench.component_index.MOVED_OUT`), with one DeprecationWarning; whether
        ``name`` is registered now."""
        from intrabench.component_index import MOVED_OUT

        module = MOVED_OUT.get(self.group, {}).get(name)
        if module is None:
            return False
        from intrabench.old_paths import warn_once

        warn_once(
            f"{self.group}:{name}",
            f"{self.kind} '{name}' is no longer built in: add 'imports: [{module}]' to the "
            "config (imported for now)",
        )
        importlib.import_module(module)
        return name in self._classes

    # -- lookup ---------------------------------------------------------------------------
    def names(self) -> list[str]:
        """The registered names, sorted (every source loaded).

        Returns:
            Built-in and plugin names, sorted.
        """
        self._ensure_loaded()
        return sorted(self._classes)

    def items(self) -> list[tuple[str, type[T]]]:
        """The ``(name, class)`` pairs, sorted by name (every source loaded).

        Returns:
            ``(name, class)`` for every registered component, sorted by name.
        """
        self._ensure_loaded()
        return sorted(self._classes.items())

    def source(self, name: str) -> str:
        """The module that registered ``name``.

        Args:
            name: A registered name.

        Returns:
            The dotted module name of the class (e.g. ``intrabench.models.sam``).

        Raises:
            KeyError: ``name`` is not registered.
        """
        self._ensure_loaded()
        return self._sources[name]

    def is_known(self, name: str) -> bool:
        """Whether ``name`` is registered (loading the registry as ``get`` would; no error).

        Args:
            name: A component name as a configuration gives it.

        Returns:
            True when :meth:`get` would return a class for it.
        """
        if name in self._classes:
            return True
        if not self._loaded and self._import_defining_module(name):
            return True
        self._ensure_loaded()
        return name in self._classes or self._import_moved_out(name)

    def unknown_note(self, name: str) -> str:
        """``model 'sam-mde' (did you mean 'sam-med'?)``: an unknown name for a list.

        Args:
            name: The name that is not registered.

        Returns:
            The kind and quoted name, with the closest registered name when there is one.
        """
        self._ensure_loaded()
        close = difflib.get_close_matches(name, self._classes, n=1)
        return f"{self.kind} '{name}'" + (f" (did you mean '{close[0]}'?)" if close else "")

    def get(self, name: str) -> type[T]:
        """The class registered as ``name``, importing only its module when the index names it.

        Args:
            name: A component name as a configuration gives it.

        Returns:
            The registered class (not an instance).

        Raises:
            ConfigError: No component has that name (the message suggests close names).
        """
        if name in self._classes:  # registered by a module imported already: no full load
            return self._classes[name]
        if not self._loaded and self._import_defining_module(name):
            return self._classes[name]
        self._ensure_loaded()
        if name not in self._classes and not self._import_moved_out(name):
            close = difflib.get_close_matches(name, self._classes, n=3)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ConfigError(
                f"unknown {self.kind} '{name}'.{hint} Valid {self.kind}s: {', '.join(self.names())}"
                f" (your own {self.kind}: list its module under 'imports:' in the config, or "
                "register it through an entry point: docs/adding-a-model.md)"
            )
        return self._classes[name]

    def check_params(self, name: str, params: dict[str, Any]) -> None:
        """Check that ``params`` fit the constructor of the component ``name``.

        Args:
            name: The registered name.
            params: The keyword arguments the configuration gives its constructor.

        Raises:
            ConfigError: A parameter is unknown (the message suggests a close one and lists
                the valid ones), a required one is missing, or a value has the wrong type.
        """
        cls = self.get(name)
        signature = inspect.signature(cls.__init__)
        accepted, takes_kwargs = constructor_parameters(cls)
        if not takes_kwargs:
            for key in params:
                if key not in accepted:
                    close = difflib.get_close_matches(key, accepted, n=1)
                    hint = f" (did you mean '{close[0]}'?)" if close else ""
                    valid = ", ".join(accepted) or "none"
                    raise ConfigError(
                        f"{self.kind} '{name}' has no parameter '{key}'{hint}; valid: {valid}"
                    )
        try:
            signature.bind(None, **params)
        except TypeError as error:
            raise ConfigError(f"{self.kind} '{name}': {error}") from None
        _check_param_types(cls, params, f"{self.kind} '{name}'")

    def create(self, name: str, params: dict[str, Any] | None = None) -> T:
        """An instance of the component ``name`` built with ``params`` after checking them.

        Args:
            name: The registered name.
            params: Keyword arguments of its constructor; None for none.

        Returns:
            The built component.

        Raises:
            ConfigError: A parameter is unknown or its value is refused by the component.
        """
        params = dict(params or {})
        self.check_params(name, params)
        try:
            return self.get(name)(**params)
        except (TypeError, ValueError) as error:
            message = str(error) if len(str(error)) <= 300 else f"{str(error)[:297]}..."
            raise ConfigError(
                f"{self.kind} '{name}' with {quoted(params, 200)}: {message}"
            ) from None


def _import_public_modules(package_name: str) -> None:
    """Import every module of ``package_name`` and of its subpackages whose name does not
    start with ``_`` (those are helpers), in name order."""
    package = importlib.import_module(package_name)
    for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if module.name.startswith("_"):
            continue
        if module.ispkg:
            _import_public_modules(f"{package_name}.{module.name}")
        else:
            importlib.import_module(f"{package_name}.{module.name}")


def constructor_parameters(cls: type) -> tuple[list[str], bool]:
    """(the keyword parameters ``cls(...)`` accepts, whether it accepts any keyword at all).

    A constructor that passes ``**params`` on to its base class accepts the base's parameters
    too: the classes of the MRO are followed while each ``__init__`` takes ``**kwargs``.

    Args:
        cls: A component class.

    Returns:
        The parameter names in constructor order (subclass first), and True when the chain
        ends in an ``__init__`` that takes ``**kwargs`` or cannot be inspected (any keyword may
        then be valid), False when it ends in one without ``**kwargs``.
    """
    accepted: list[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            parameters = list(inspect.signature(init).parameters.values())[1:]
        except (TypeError, ValueError):  # a builtin's __init__
            return accepted, True
        for parameter in parameters:
            if (
                parameter.kind
                not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
                and parameter.name not in accepted
            ):
                accepted.append(parameter.name)
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return accepted, False
    return accepted, True


models: Registry = Registry("model", "intrabench.models", ("intrabench.models",))
prompters: Registry = Registry("prompter", "intrabench.prompters", ("intrabench.prompters",))
refiners: Registry = Registry("refiner", "intrabench.refiners", ("intrabench.prompters",))
datasets: Registry = Registry("dataset", "intrabench.datasets", ("intrabench.datasets",))
#: where simulated users click (docs/realistic-clicks.md)
clickability: Registry = Registry(
    "clickability model", "intrabench.clickability", ("intrabench.prompters.clickability",)
)


def _check_param_types(cls: type, params: dict[str, Any], what: str) -> None:
    """ConfigError when a parameter's value does not fit its type hint (``n_points: 1.5``,
    ``target_type: organs`` for a ``Literal["instance", "organ"]``), checked with pydantic in
    its lax mode (1.0 is an int, "2" is not a float). Hints that cannot be resolved or
    checked (plain classes pydantic does not know) are not checked."""
    import typing

    from pydantic import TypeAdapter, ValidationError

    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # unresolvable forward references: leave the check to the constructor
        return
    for key, value in params.items():
        hint = hints.get(key)
        if hint is None or hint is Any:
            continue
        try:
            adapter = TypeAdapter(hint)
        except Exception:  # a type pydantic cannot build a validator for
            continue
        try:
            adapter.validate_python(value, strict=False)
        except ValidationError as error:
            first = error.errors()[0]
            raise ConfigError(
                f"{what}: parameter '{key}' = {quoted(value)}: {first['msg']}"
            ) from None
