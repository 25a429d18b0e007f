"""The MPI operator's fixed health port: a second control plane on the machine waits for the first one's operator
to stop instead of starting one that exits at once ("address already in use")."""

from __future__ import annotations

import threading

import pytest

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.live import control_plane


@pytest.fixture(autouse=True)
def own_port(monkeypatch):
    """A port of the tests' own, so a simulation running beside them neither waits for them nor they for it."""
    monkeypatch.setattr(control_plane, "MPI_OPERATOR_PORT", 65001)


def test_a_second_plane_waits_for_the_port_then_gets_it(capsys):
    first = control_plane._hold_mpi_operator_port()
    got = []
    second = threading.Thread(target=lambda: got.append(control_plane._hold_mpi_operator_port()))
    second.start()
    second.join(timeout=1.0)
    assert second.is_alive() and got == []  # still waiting
    first.close()
    second.join(timeout=5.0)
    assert len(got) == 1
    got[0].close()
    assert "waiting for another run's MPI operator to stop (it always listens on port 65001)" in capsys.readouterr().err


def test_a_port_held_too_long_is_one_line(monkeypatch):
    monkeypatch.setattr(control_plane, "_PORT_WAIT", 0.6)
    first = control_plane._hold_mpi_operator_port()
    try:
        expected = "another run's MPI operator held port 65001 for 1 s; stop it and try again"
        with pytest.raises(InputError, match=expected):
            control_plane._hold_mpi_operator_port()
    finally:
        first.close()
