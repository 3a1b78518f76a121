"""The device model of the latency planner: named devices and the links between them.

A :class:`Device` has a name, a *kind* (the key of :attr:`stagecut.Node.compute` that gives a
node's time on it), a memory capacity (bytes, ``inf`` for none), a speed (a node's time is its
time for the kind divided by the speed, unless the node gives a time for the device's own name)
and a flag for unbounded parallelism (a CPU pool: any number of nodes at once; every other
device runs one node at a time).

:class:`Devices` holds the devices and a bandwidth between every pair. A tensor of ``s`` bytes
that goes from a node on device ``a`` to a consumer on device ``b != a`` takes
``s / bandwidth[a][b]`` time units (the diagonal is never used: a tensor on its own device is
free). Three ways to build one:

* :meth:`Devices.pcie_star`: the PCIe star of the throughput workloads: one CPU pool and ``k``
  identical accelerators. Bandwidths are *relative* there: a node's ``comm`` (already a time:
  moving its output between an accelerator and CPU memory) is paid once from an accelerator to
  the CPU or back, twice between two accelerators (through CPU memory);
* :meth:`Devices.servers`: servers of ``g`` GPUs, an intra-server bandwidth (NVLink, e.g.
  50 GB/s) and an inter-server one (Ethernet, e.g. 20 GB/s), in bytes per time unit of the
  graph's times;
* :meth:`Devices.from_matrix` (and :meth:`Devices.from_dict`): explicit devices and matrix.

Examples
--------
>>> from stagecut.latency import Devices
>>> d = Devices.pcie_star(2, memory=16e9)
>>> d.names, d.transfer_time(3.0, 0, 1), d.transfer_time(3.0, 1, 2)
(('cpu', 'accelerator:0', 'accelerator:1'), 3.0, 6.0)
>>> s = Devices.servers(2, 2, intra_bandwidth=50.0, inter_bandwidth=20.0)
>>> s.names, s.transfer_time(100.0, 0, 1), s.transfer_time(100.0, 1, 2)
(('gpu:0', 'gpu:1', 'gpu:2', 'gpu:3'), 2.0, 5.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from stagecut.errors import InvalidArgumentError, MemoryLimitError
from stagecut.graph import ACCELERATOR, CPU
from stagecut.validate import check_flag, check_int, check_number, shown

__all__ = ["Device", "Devices", "BandwidthUnit"]

#: ``"relative"``: a node's ``comm`` is its transfer time at bandwidth 1 (the PCIe star);
#: ``"bytes"``: bandwidths are bytes per time unit and nodes need output sizes in bytes.
BandwidthUnit = Literal["relative", "bytes"]


@dataclass(frozen=True)
class Device:
    """One device.

    Parameters
    ----------
    name : str
        Unique name (what schedules report), e.g. ``"gpu:3"``.
    kind : str
        The key of a node's ``compute`` mapping that gives its time here (``"cpu"``, ``"gpu"``...).
    memory : float
        Capacity in bytes (``inf``: unbounded).
    speed : float
        A node's time here is ``compute[kind] / speed`` (unless it gives ``compute[name]``).
    parallel : bool
        Unbounded parallelism (a CPU pool): nodes never wait for each other here.

    Raises
    ------
    InvalidArgumentError
        An empty name or kind, a memory that is NaN or negative, a speed that is not positive.
    """

    name: str
    kind: str
    memory: float = math.inf
    speed: float = 1.0
    parallel: bool = False

    def __post_init__(self) -> None:
        for f in ("name", "kind"):
            v = getattr(self, f)
            if not isinstance(v, str) or not v:
                raise InvalidArgumentError(f"device {f}: expected a non-empty string, got {shown(v)}")
        where = f"device {self.name!r}"
        object.__setattr__(self, "memory", check_number(self.memory, f"{where}: memory", allow_inf=True,
                                                       error=InvalidArgumentError))
        object.__setattr__(self, "speed", check_number(self.speed, f"{where}: speed", positive=True,
                                                      error=InvalidArgumentError))
        object.__setattr__(self, "parallel", check_flag(self.parallel, f"{where}: parallel",
                                                       error=InvalidArgumentError))


@dataclass(frozen=True)
class Devices:
    """Devices and the bandwidth between every pair (see the module docs).

    Parameters
    ----------
    devices : sequence of Device
        At least one; names unique.
    bandwidth : sequence of sequences of float
        ``bandwidth[a][b]``: bytes (or relative units) per time unit from device ``a`` to ``b``,
        positive for ``a != b`` (``inf``: free); the diagonal is ignored.
    unit : {"relative", "bytes"}
        What the bandwidths measure (see :data:`BandwidthUnit`).
    topology : str
        How it was built (``"pcie"``, ``"servers"``, ``"matrix"``), for the reports.

    Raises
    ------
    InvalidArgumentError
        No devices, a repeated name, a matrix of the wrong shape, a bandwidth that is missing,
        zero, negative or NaN between two distinct devices (the topology would be disconnected).
    """

    devices: tuple[Device, ...]
    bandwidth: tuple[tuple[float, ...], ...]
    unit: BandwidthUnit = "bytes"
    topology: str = "matrix"

    def __post_init__(self) -> None:
        devs = tuple(self.devices)
        if not devs:
            raise InvalidArgumentError("devices: at least one device is needed")
        for d in devs:
            if not isinstance(d, Device):
                raise InvalidArgumentError(f"devices: expected Device objects, got {shown(d)}")
        names = [d.name for d in devs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InvalidArgumentError(f"devices: the name {dup[0]!r} is used twice")
        if self.unit not in ("relative", "bytes"):
            raise InvalidArgumentError(f"devices: unit must be 'relative' or 'bytes', got {shown(self.unit)}")
        n = len(devs)
        bw = self.bandwidth
        if not isinstance(bw, Sequence) or len(bw) != n:
            raise InvalidArgumentError(f"bandwidth: expected a {n} x {n} matrix (one row per device)")
        rows = []
        for a, row in enumerate(bw):
            if not isinstance(row, Sequence) or len(row) != n:
                raise InvalidArgumentError(f"bandwidth: row {a} ({names[a]}) must have {n} entries")
            out = []
            for b, x in enumerate(row):
                if a == b:
                    out.append(math.inf)
                    continue
                where = f"bandwidth from {names[a]} to {names[b]}"
                if x is None:
                    raise InvalidArgumentError(f"{where}: missing (the devices would be disconnected)")
                out.append(check_number(x, where, positive=True, allow_inf=True, error=InvalidArgumentError))
            rows.append(tuple(out))
        object.__setattr__(self, "devices", devs)
        object.__setattr__(self, "bandwidth", tuple(rows))

    # -- constructors
    @classmethod
    def pcie_star(cls, accelerators: int, *, memory: float = math.inf, cpu: bool = True,
                  accelerator_kind: str = ACCELERATOR, cpu_kind: str = CPU) -> Devices:
        """One CPU pool (unbounded parallelism, unbounded memory) and ``accelerators`` identical
        accelerators of ``memory`` bytes each, over PCIe (relative bandwidths: ``comm`` once
        between an accelerator and the CPU, twice between two accelerators).

        Raises
        ------
        InvalidArgumentError
            A device count that is not an integer >= 0 (>= 1 without the CPU), a bad memory.

        >>> Devices.pcie_star(1, cpu=False).names
        ('accelerator:0',)
        """
        k = check_int(accelerators, "accelerators", minimum=0 if cpu else 1)
        check_device_count(k + (1 if cpu else 0), "accelerators", k)
        devs = [Device("cpu", cpu_kind, parallel=True)] if cpu else []
        devs += [Device(f"accelerator:{i}", accelerator_kind, memory=memory) for i in range(k)]
        n = len(devs)
        # accelerator <-> CPU: comm once; accelerator <-> accelerator: twice (through CPU memory)
        bw = [[math.inf if a == b else (1.0 if cpu and 0 in (a, b) else 0.5) for b in range(n)]
              for a in range(n)]
        return cls(tuple(devs), tuple(tuple(r) for r in bw), unit="relative", topology="pcie")

    @classmethod
    def servers(cls, servers: int, gpus_per_server: int, *, intra_bandwidth: float, inter_bandwidth: float,
                memory: float = math.inf, kind: str = "gpu", speed: float = 1.0) -> Devices:
        """``servers`` servers of ``gpus_per_server`` identical GPUs named ``gpu:0``, ``gpu:1``...
        (server by server), ``intra_bandwidth`` between GPUs of one server and
        ``inter_bandwidth`` across servers (bytes per time unit of the graph's times).

        Raises
        ------
        InvalidArgumentError
            Counts that are not integers >= 1, bandwidths that are not positive.

        >>> Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0).topology
        'servers'
        """
        s = check_int(servers, "servers", minimum=1)
        g = check_int(gpus_per_server, "gpus_per_server", minimum=1)
        intra = check_number(intra_bandwidth, "intra_bandwidth", positive=True, allow_inf=True,
                             error=InvalidArgumentError)
        inter = check_number(inter_bandwidth, "inter_bandwidth", positive=True, allow_inf=True,
                             error=InvalidArgumentError)
        n = s * g
        check_device_count(n, "servers x gpus_per_server", f"{s} x {g}")
        devs = tuple(Device(f"gpu:{i}", kind, memory=memory, speed=speed) for i in range(n))
        bw = tuple(tuple(math.inf if a == b else (intra if a // g == b // g else inter) for b in range(n))
                   for a in range(n))
        return cls(devs, bw, unit="bytes", topology="servers")

    @classmethod
    def from_matrix(cls, devices: Sequence[Device], bandwidth: Sequence[Sequence[float]], *,
                    unit: BandwidthUnit = "bytes") -> Devices:
        """Explicit devices and bandwidth matrix (see the class docs).

        Raises
        ------
        InvalidArgumentError
            See :class:`Devices`.
        """
        return cls(tuple(devices), tuple(tuple(r) for r in bandwidth), unit=unit, topology="matrix")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Devices:
        """Read a device description (a JSON object)::

            {"devices": [{"name": "cpu", "kind": "cpu", "parallel": true},
                         {"name": "gpu:0", "kind": "gpu", "memory": 16e9, "speed": 1.0}],
             "bandwidth": [[null, 12e6], [12e6, null]],   # bytes per time unit
             "unit": "bytes"}

        or a topology: ``{"topology": "pcie", "accelerators": 4, "memory": 16e9}``,
        ``{"topology": "servers", "servers": 2, "gpus_per_server": 4, "intra_bandwidth": 50e6,
        "inter_bandwidth": 20e6, "memory": 16e9}``.

        Raises
        ------
        InvalidArgumentError
            A missing or malformed field, naming it.

        >>> Devices.from_dict({"topology": "pcie", "accelerators": 2}).names
        ('cpu', 'accelerator:0', 'accelerator:1')
        """
        if not isinstance(data, Mapping):
            raise InvalidArgumentError(f"devices: expected a JSON object, got {shown(data)}")
        topo = data.get("topology", "matrix")
        mem = check_number(data.get("memory", math.inf), "memory", allow_inf=True, error=InvalidArgumentError)
        if topo == "pcie":
            if "cpu" in data and not isinstance(data["cpu"], bool):
                raise InvalidArgumentError(f"cpu: expected true or false, got {shown(data['cpu'])}")
            return cls.pcie_star(_need(data, "accelerators"), memory=mem, cpu=data.get("cpu", True))
        if topo == "servers":
            return cls.servers(_need(data, "servers"), _need(data, "gpus_per_server"),
                               intra_bandwidth=_need(data, "intra_bandwidth"),
                               inter_bandwidth=_need(data, "inter_bandwidth"), memory=mem,
                               kind=data.get("kind", "gpu"))
        if topo != "matrix":
            raise InvalidArgumentError(f"topology: expected 'pcie', 'servers' or 'matrix', got {shown(topo)}")
        raw = _need(data, "devices")
        if not isinstance(raw, Sequence) or isinstance(raw, str):
            raise InvalidArgumentError("devices: expected a list of device objects")
        check_device_count(len(raw), "devices", len(raw))
        devs = []
        for i, d in enumerate(raw):
            if not isinstance(d, Mapping):
                raise InvalidArgumentError(f"devices[{i}]: expected an object, got {shown(d)}")
            unknown = set(d) - {"name", "kind", "memory", "speed", "parallel"}
            if unknown:
                raise InvalidArgumentError(f"devices[{i}]: unknown field {sorted(unknown)[0]!r}")
            if "memory" not in d:
                raise InvalidArgumentError(f"devices[{i}]: memory is missing (use \"inf\" for none)")
            m = d["memory"]
            m = math.inf if m in ("inf", None) else m
            devs.append(Device(d.get("name", ""), d.get("kind", ""), memory=m, speed=d.get("speed", 1.0),
                               parallel=d.get("parallel", False)))
        bw = _need(data, "bandwidth")
        unit = data.get("unit", "bytes")
        return cls(tuple(devs), bw, unit=unit, topology="matrix")

    def to_dict(self) -> dict[str, Any]:
        """The explicit form of :meth:`from_dict` (round-trips; ``inf`` as the string ``"inf"``).

        >>> d = Devices.pcie_star(1)
        >>> Devices.from_dict(d.to_dict()) == Devices(d.devices, d.bandwidth, unit="relative")
        True
        """
        def num(x: float) -> float | str:
            return x if math.isfinite(x) else "inf"
        return {
            "devices": [{"name": d.name, "kind": d.kind, "memory": num(d.memory), "speed": d.speed,
                         "parallel": d.parallel} for d in self.devices],
            "bandwidth": [[None if a == b else num(x) for b, x in enumerate(r)]
                          for a, r in enumerate(self.bandwidth)],
            "unit": self.unit,
        }

    # -- queries
    def __len__(self) -> int:
        return len(self.devices)

    @property
    def names(self) -> tuple[str, ...]:
        """Device names, in order."""
        return tuple(d.name for d in self.devices)

    def index(self, name: str) -> int:
        """Position of the device called ``name``.

        Raises
        ------
        InvalidArgumentError
            No such device.
        """
        for i, d in enumerate(self.devices):
            if d.name == name:
                return i
        raise InvalidArgumentError(f"no device named {shown(name)} (devices: {', '.join(self.names)})")

    def transfer_time(self, size: float, a: int, b: int) -> float:
        """Time to move ``size`` from device ``a`` to device ``b`` (0 on the same device)."""
        if a == b or size == 0:
            return 0.0
        return size / self.bandwidth[a][b]


#: The most devices a device description may have: every method keeps a devices x devices
#: bandwidth matrix and nodes x devices tables (1024 devices: a million bandwidths).
MAX_DEVICES = 1024


def check_device_count(n: int, parameter: str, given: object) -> None:
    """Refuse, before anything is allocated, more than :data:`MAX_DEVICES` devices
    (:class:`~stagecut.errors.MemoryLimitError` naming ``parameter`` and the matrix's size)."""
    if n > MAX_DEVICES:
        mib = 8.0 * n * n / 2**20  # floats of the bandwidth matrix; Python's tuples take more
        size = f"{mib:.3g} MiB" if mib < 1024 else f"{mib / 1024:.3g} GiB"
        raise MemoryLimitError(f"{parameter}: {given} means {n} devices; at most {MAX_DEVICES} are supported "
                               f"(their {n} x {n} bandwidth matrix alone would take more than {size})")


def _need(data: Mapping[str, Any], key: str) -> Any:
    if key not in data:
        raise InvalidArgumentError(f"devices: {key} is missing")
    return data[key]
