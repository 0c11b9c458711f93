"""XIDs for the real NVML backend come from the driver's reports in the kernel log."""

import os

import pytest

from fleet.nvml.kernel_xids import kmsg_records, parse_xid, pci_key, recent_xids

# Records as /dev/kmsg gives them: "priority,sequence,microseconds since boot,flags;text".
LOG = [
    "4,1001,1000000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=2716, name=python3, GPU has fallen off the bus.",
    " SUBSYSTEM=pci",  # a continuation line
    "6,1002,3500000000,-;NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp",
    "6,1003,3550000000,-;NVRM: Xid (PCI:0000:86:00): 48, pid=99, name=vllm, double bit error",
    "6,1004,3560000000,-;NVRM: GPU at PCI:0000:86:00: GPU-5c1e UUID",  # not an XID
    "6,1005,3570000000,-;NVRM: Xid (PCI:0000:86:00): 48, pid=99, name=vllm, again",
    "6,1006,3580000000,-;eth0: link up",
]


def write_log(tmp_path, lines, filler=0):
    path = tmp_path / "kmsg"
    noise = [f"6,{i},{i},-;{'x' * 200}" for i in range(filler)]
    path.write_text("\n".join(noise + lines) + "\n")
    return str(path)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=2716, name=python3, GPU has fallen off the bus.",
            ("0000:3b:00", 79),
        ),
        ("NVRM: Xid (PCI:0001:C1:00): 31, Ch 00000008, intr 10000000. MMU Fault", ("0001:c1:00", 31)),
        ("NVRM: Xid (PCI:00000000:3B:00.0): 94, pid=1, Contained ECC error.", ("0000:3b:00", 94)),
        ("NVRM: GPU at PCI:0000:3b:00: GPU-5c1e", None),
        ("Xid 79 mentioned in passing", None),
    ],
)
def test_the_driver_s_xid_reports_are_read_from_their_text(line, expected):
    assert parse_xid(line) == expected


def test_nvml_and_the_kernel_spell_one_gpu_s_address_alike():
    assert pci_key("00000000:3B:00.0") == pci_key("0000:3b:00") == "0000:3b:00"


def test_the_xids_of_the_window_are_kept_by_gpu_in_the_order_logged(tmp_path):
    log = recent_xids(window_s=900, path=write_log(tmp_path, LOG), now_s=3600.0)
    assert log.unreadable == ""
    assert log.by_gpu == {"0000:3b:00": [13], "0000:86:00": [48, 48]}  # XID 79 is an hour old
    assert log.for_bus_id("00000000:86:00.0") == (48,)
    assert log.for_bus_id("00000000:3B:00.0") == (13,)
    assert log.for_bus_id("00000000:AF:00.0") == ()


def test_records_that_straddle_two_reads_are_put_back_together(tmp_path):
    log = recent_xids(window_s=900, path=write_log(tmp_path, LOG, filler=100), now_s=3600.0)
    assert log.by_gpu == {"0000:3b:00": [13], "0000:86:00": [48, 48]}


def test_lines_in_other_shapes_are_skipped():
    records = list(kmsg_records([b"garbage\n6,1,notanumber,-;text\n6,2,5000000,-;kept\n"]))
    assert records == [(5.0, "kept")]


def test_an_unreadable_log_finds_no_xid_and_says_why(tmp_path):
    log = recent_xids(path=str(tmp_path / "missing"))
    assert log.by_gpu == {} and "could not be read" in log.unreadable


def test_this_machine_s_own_kernel_log_is_read_to_its_end_without_waiting():
    log = recent_xids()  # returns at the end of the log instead of waiting for new records
    if os.geteuid() == 0 and os.path.exists("/dev/kmsg"):
        assert log.unreadable == ""  # root may read it
    else:
        assert "could not be read" in log.unreadable
    assert log.by_gpu == {}  # no NVIDIA driver here, so no XID lines
