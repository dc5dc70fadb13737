"""``runs_in:`` of a model in a run config: where the model runs when not in this process.

Exactly one way to reach it::

    runs_in: {python: /opt/segvol-env/bin/python}        # another environment's Python
    runs_in: {command: [/opt/env/bin/intrabench, serve-model, --stdio]}   # any command
    runs_in: {container: {engine: docker, image: intrabench-medsam2:1.0}}  # a container
    runs_in: {url: tcp://gpu-node-3:8765}                 # a running ``serve-model --listen``

The model's name and ``params`` stay the config's, and so do the unit keys: where a model runs
is not part of what it is, so a served run and an in-process run give the same rows.
"""

from __future__ import annotations

import math
import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class ContainerSpec(BaseModel):
    """A container image that has IntraBench and the model installed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: the container tool (its ``run``/``exec`` command is built from it)
    engine: Literal["docker", "podman", "apptainer", "singularity"] = "docker"
    #: the image (docker/podman: a name or id; apptainer/singularity: a .sif file)
    image: str = Field(min_length=1)
    #: options for the tool before the image (e.g. ``[--gpus, all]`` or ``[--nv]``)
    options: list[str] = Field(default_factory=list)


class RunsIn(BaseModel):
    """Where a model runs outside this process, and how long it may take to answer."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    #: another environment's Python (virtualenv or conda) with IntraBench and the model
    #: installed: ``PYTHON -m intrabench serve-model NAME --stdio`` is started
    python: str | None = None
    #: any command speaking the model protocol on its standard input and output; it is told
    #: the model's name and params in INTRABENCH_SERVE_MODEL and INTRABENCH_SERVE_PARAMS (JSON)
    command: list[str] | None = None
    #: a container image with IntraBench and the model (``intrabench serve-model`` inside)
    container: ContainerSpec | None = None
    #: a running server: ``tcp://HOST:PORT`` (``intrabench serve-model NAME --listen``)
    url: str | None = None
    #: seconds a request may go without an answer (a byte of progress) before the server is
    #: given up: its unit fails, the run goes on
    timeout_s: float = Field(default=600.0, gt=0)
    #: seconds the server may take to start and build the model (its first answer)
    start_timeout_s: float = Field(default=900.0, gt=0)
    #: how the image reaches the server once per case: ``file`` (a .npy file in /dev/shm or
    #: the temporary folder, same machine only), ``stream`` (through the pipe or socket), or
    #: ``auto``: file for ``python`` and ``command``, stream for ``container`` and ``url``
    image_transfer: Literal["auto", "file", "stream"] = "auto"
    #: environment variables added for the server's process
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("command", mode="before")
    @classmethod
    def _split_command(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return shlex.split(value)
            except ValueError as error:
                raise ValueError(
                    f"command {value[:80]!r} cannot be split into words "
                    f"({error}); give it as a list"
                ) from None
        return value

    @field_validator("timeout_s", "start_timeout_s")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("give a finite number of seconds")
        return value

    @field_validator("url")
    @classmethod
    def _tcp_url(cls, value: str | None) -> str | None:
        if value is not None:
            tcp_address(value)
        return value

    @model_validator(mode="after")
    def _one_way(self) -> RunsIn:
        given = [k for k in ("python", "command", "container", "url") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of python, command, container or url "
                f"(given: {', '.join(given) or 'none'})"
            )
        if self.command is not None and not self.command:
            raise ValueError("command is empty")
        return self

    @property
    def way(self) -> str:
        """``python``, ``command``, ``container`` or ``url``."""
        return next(k for k in ("python", "command", "container", "url") if getattr(self, k))

    def transfers_files(self) -> bool:
        """Whether the image goes to the server as a file (else through the stream).

        Returns:
            True for ``image_transfer: file``, False for ``stream``; with ``auto``, True when
            the server runs on this machine by ``python`` or ``command``.
        """
        if self.image_transfer != "auto":
            return self.image_transfer == "file"
        return self.way in ("python", "command")


def tcp_address(url: str) -> tuple[str, int]:
    """(host, port) of ``tcp://HOST:PORT``.

    Args:
        url: ``tcp://HOST:PORT`` (an IPv6 host in brackets, ``tcp://[::1]:8765``; a trailing
            ``/`` is ignored).

    Returns:
        The host (brackets removed) and the port, 1-65535.

    Raises:
        ValueError: When ``url`` is not of that form.
    """
    if not url.startswith("tcp://"):
        raise ValueError(f"url {url[:80]!r}: give tcp://HOST:PORT")
    host, _, port = url[len("tcp://") :].rstrip("/").rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"url {url[:80]!r}: give tcp://HOST:PORT with a port 1-65535")
    return host, int(port)
