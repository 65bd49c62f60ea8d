"""Build small Trace objects by hand in tests: one Builder per rank, times in abstract units."""
from __future__ import annotations

import numpy as np

from scalgraph.model import trace as tm


class Builder:
    """Collects events of all ranks; region names are interned into one region table."""

    def __init__(self, nranks: int, comms: dict[int, list[int]] | None = None):
        self.rows: list[list[tuple]] = [[] for _ in range(nranks)]
        self.regions: list[tm.Region] = []
        self._reg: dict[str, int] = {}
        self.comms = comms if comms is not None else {0: list(range(nranks))}

    def region(self, name: str) -> int:
        if name not in self._reg:
            self._reg[name] = len(self.regions)
            self.regions.append(tm.Region(name, "MPI" if name.startswith("MPI_") else "app.c",
                                          0 if name.startswith("MPI_") else 10 + len(self.regions)))
        return self._reg[name]

    def ev(self, rank, t, kind, region=-1, peer=-1, tag=0, comm=-1, nbytes=0, nrecv=0, request=-1):
        self.rows[rank].append((t, kind, region, peer, tag, comm, nbytes, nrecv, request))
        return self

    def enter(self, rank, t, name):
        return self.ev(rank, t, tm.ENTER, region=self.region(name))

    def exit(self, rank, t, name):
        return self.ev(rank, t, tm.EXIT, region=self.region(name))

    def work(self, rank, t0, t1, name):
        return self.enter(rank, t0, name).exit(rank, t1, name)

    def send(self, rank, t0, t1, dst, tag=0, comm=0, name="MPI_Send", nbytes=8):
        self.enter(rank, t0, name).ev(rank, t0, tm.SEND, peer=dst, tag=tag, comm=comm, nbytes=nbytes)
        return self.exit(rank, t1, name)

    def recv(self, rank, t0, t1, src, tag=0, comm=0, name="MPI_Recv", nbytes=8):
        self.enter(rank, t0, name).ev(rank, t1, tm.RECV, peer=src, tag=tag, comm=comm, nbytes=nbytes)
        return self.exit(rank, t1, name)

    def isend(self, rank, t0, t1, dst, req, tag=0, comm=0):
        self.enter(rank, t0, "MPI_Isend").ev(rank, t0, tm.ISEND, peer=dst, tag=tag, comm=comm, nbytes=8, request=req)
        return self.exit(rank, t1, "MPI_Isend")

    def irecv(self, rank, t0, t1, req, comm=0):
        self.enter(rank, t0, "MPI_Irecv").ev(rank, t0, tm.IRECV_REQUEST, comm=comm, request=req)
        return self.exit(rank, t1, "MPI_Irecv")

    def wait(self, rank, t0, t1, completions, name="MPI_Waitall"):
        """completions: ("send", req) or ("recv", req, src, tag) in completion order."""
        self.enter(rank, t0, name)
        for c in completions:
            if c[0] == "send":
                self.ev(rank, t1, tm.ISEND_COMPLETE, request=c[1])
            else:
                self.ev(rank, t1, tm.IRECV, peer=c[2], tag=c[3] if len(c) > 3 else 0, comm=0, nbytes=8, request=c[1])
        return self.exit(rank, t1, name)

    def coll(self, rank, t0, t1, name, comm=0, root=-1, sent=8, recvd=8):
        self.enter(rank, t0, name).ev(rank, t0, tm.COLL_BEGIN, comm=comm)
        self.ev(rank, t1, tm.COLL_END, peer=root, comm=comm, nbytes=sent, nrecv=recvd)
        return self.exit(rank, t1, name)

    def build(self) -> tm.Trace:
        events = []
        for rows in self.rows:
            ev = tm.make_events(len(rows))
            for i, row in enumerate(rows):
                ev[i] = row
            # stable sort by time keeps the builder's order for equal stamps
            events.append(ev[np.argsort(ev["time"], kind="stable")])
        return tm.Trace(regions=list(self.regions), comms=dict(self.comms), events=events)
