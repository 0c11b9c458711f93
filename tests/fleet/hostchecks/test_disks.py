"""The disk check reads the space of the model directory and /dev/shm and the filesystem under
each (`df -h /models`, `df -h /dev/shm`, guide 2.5.3 and 2.5.4)."""

import json
import os

from fleet.hostchecks.disks import find_mount, path_space, read_mounts
from tests.fleet.host_trees import Mnt, build_host_tree, call_unprivileged, world_traversable_tmp

GIB = 1 << 30


def statvfs_of(total_gib, free_gib, available_gib, *, frsize=4096):
    """os.statvfs with the sizes of a bigger filesystem than the test's: it fails where the
    real one fails (a missing path, no permission)."""

    def statvfs(path):
        os.statvfs(path)
        blocks = [n * GIB // frsize for n in (total_gib, free_gib, available_gib)]
        return os.statvfs_result((frsize, frsize, *blocks, 1000, 900, 900, 0, 255))

    return statvfs


def test_the_model_directory_s_space_and_filesystem(tmp_path):
    root = build_host_tree(tmp_path)

    space = path_space("/models/Qwen2.5-72B-Instruct", root=root, statvfs=statvfs_of(3576, 420, 240))

    assert space.exists and space.path == "/models/Qwen2.5-72B-Instruct"
    assert (space.total_bytes, space.free_bytes, space.available_bytes) == (3576 * GIB, 420 * GIB, 240 * GIB)
    assert space.used_fraction == 1 - 420 / 3576
    assert (space.mount.mount_point, space.mount.fstype, space.mount.source) == (
        "/models",
        "xfs",
        "/dev/nvme1n1",
    )
    assert space.is_tmpfs is False


def test_docker_s_64_mib_dev_shm_is_a_tmpfs_with_its_size_option(tmp_path):
    shm = Mnt("/dev/shm", "tmpfs", "shm", "rw,nosuid,nodev,noexec,relatime", "rw,size=65536k,inode64")
    root = build_host_tree(tmp_path, mounts=[Mnt("/", "overlay", "overlay"), shm])

    space = path_space("/dev/shm", root=root, statvfs=statvfs_of(0.0625, 0.06, 0.06))

    assert space.is_tmpfs and space.mount.size_option_bytes == 64 << 20
    assert space.total_bytes == 64 << 20


def test_a_host_s_dev_shm_at_its_default_size_has_no_size_option(tmp_path):
    mount = find_mount("/dev/shm", root=build_host_tree(tmp_path))

    assert (mount.fstype, mount.size_option_bytes) == ("tmpfs", None)  # half the RAM


def test_a_missing_path_is_a_clear_result_not_an_error(tmp_path):
    space = path_space("/data/models", root=build_host_tree(tmp_path), statvfs=statvfs_of(1, 1, 1))

    assert not space.exists and space.total_bytes is None
    assert str(space.problem) == "/data/models does not exist"
    assert space.mount.mount_point == "/"  # where it would be


def test_paths_that_could_leave_the_root_are_refused(tmp_path):
    root = build_host_tree(tmp_path)

    for path in ("models", "/models/../../etc"):
        space = path_space(path, root=root)
        assert str(space.problem) == f"{path} is not an absolute path" and not space.exists


def test_the_real_statvfs_reads_the_tree_s_own_filesystem(tmp_path):
    space = path_space("/dev/shm", root=build_host_tree(tmp_path))

    assert space.exists and space.total_bytes > 0 and 0 <= space.available_bytes <= space.total_bytes


def test_a_directory_the_agent_may_not_enter_says_so():
    with world_traversable_tmp() as tmp:
        root = build_host_tree(tmp)
        (root / "models").chmod(0)

        space = call_unprivileged(path_space, "/models/Qwen2.5-72B-Instruct", root=root)

    assert not space.exists
    assert str(space.problem) == (
        "/models/Qwen2.5-72B-Instruct could not be read: permission denied (the agent needs to run as root)"
    )


def test_proc_mounts_stands_in_when_mountinfo_is_missing(tmp_path):
    root = build_host_tree(tmp_path)
    (root / "proc/self/mountinfo").unlink()

    mount = find_mount("/models/x", root=root)

    assert (mount.mount_point, mount.fstype, mount.source) == ("/models", "xfs", "/dev/nvme1n1")
    assert "noatime" in mount.options


def test_mount_points_with_spaces_are_unescaped(tmp_path):
    root = build_host_tree(
        tmp_path, mounts=[Mnt("/", "ext4", "/dev/sda1"), Mnt("/data/my models", "nfs4", "nas:/m")]
    )

    assert find_mount("/data/my models/qwen", root=root).fstype == "nfs4"
    assert find_mount("/data/my", root=root).fstype == "ext4"


def test_the_last_mount_on_a_mount_point_is_the_one_in_use(tmp_path):
    mounts = [
        Mnt("/", "ext4", "/dev/sda1"),
        Mnt("/models", "ext4", "/dev/sdb1"),
        Mnt("/models", "nfs4", "nas:/m"),
    ]

    assert find_mount("/models", root=build_host_tree(tmp_path, mounts=mounts)).fstype == "nfs4"


def test_junk_and_truncated_mount_lines_are_passed_over(tmp_path):
    root = build_host_tree(tmp_path)
    good = (root / "proc/self/mountinfo").read_bytes()
    (root / "proc/self/mountinfo").write_bytes(
        b"\x00\xff\xfe junk\n36 35 98:0 / /broken rw - \n1 2\n"
        + good
        + b"99 22 0:99 / /cut rw,relatime - tmp"
    )

    mounts = read_mounts(root=root)

    assert [m.mount_point for m in mounts][-1] == "/models"
    assert find_mount("/broken", root=root).mount_point == "/"


def test_a_10_mib_mount_table_is_read_up_to_the_bound(tmp_path):
    root = build_host_tree(tmp_path)
    filler = "".join(
        f"{i} 22 0:{i} / /var/lib/docker/overlay2/{i:064x}/merged rw - overlay overlay rw\n"
        for i in range(80_000)
    )
    (root / "proc/self/mountinfo").write_text(filler)

    mounts = read_mounts(root=root)

    assert 5_000 < len(mounts) < 80_000


def test_no_mount_table_at_all_leaves_the_mount_unknown(tmp_path):
    root = build_host_tree(tmp_path)
    (root / "proc/self/mountinfo").unlink()
    (root / "proc/mounts").unlink()

    space = path_space("/models", root=root, statvfs=statvfs_of(10, 5, 5))

    assert space.exists and space.mount is None and space.is_tmpfs is None


def test_a_result_is_json_ready(tmp_path):
    space = path_space("/dev/shm", root=build_host_tree(tmp_path), statvfs=statvfs_of(256, 255, 255))

    data = json.loads(json.dumps(space.to_dict()))

    assert data["mount"]["fstype"] == "tmpfs" and data["is_tmpfs"] is True
