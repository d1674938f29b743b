"""CUDA_VISIBLE_DEVICES -> NVML index mapping (CUDA's own parsing rules)."""

from gputop.telemetry.devices import child_env_for, nvml_index_for_cuda

UUIDS = ["GPU-aaaa1111", "GPU-bbbb2222", "GPU-cccc3333", "GPU-dddd4444"]


def test_unset_means_identity():
    assert nvml_index_for_cuda(2, UUIDS, env={}) == 2
    assert nvml_index_for_cuda(4, UUIDS, env={}) is None


def test_indices_reorder():
    env = {"CUDA_VISIBLE_DEVICES": "3,1"}
    assert [nvml_index_for_cuda(i, UUIDS, env) for i in (0, 1, 2)] == [3, 1, None]


def test_uuid_prefixes():
    env = {"CUDA_VISIBLE_DEVICES": "GPU-cccc,GPU-aaaa1111"}
    assert nvml_index_for_cuda(0, UUIDS, env) == 2 and nvml_index_for_cuda(1, UUIDS, env) == 0


def test_invalid_entry_truncates_the_list_like_cuda():
    env = {"CUDA_VISIBLE_DEVICES": "1,foo,2"}
    assert nvml_index_for_cuda(0, UUIDS, env) == 1 and nvml_index_for_cuda(1, UUIDS, env) is None
    assert nvml_index_for_cuda(0, UUIDS, {"CUDA_VISIBLE_DEVICES": "MIG-1234"}) is None


def test_empty_or_duplicate_hides_everything():
    assert nvml_index_for_cuda(0, UUIDS, {"CUDA_VISIBLE_DEVICES": ""}) is None
    assert nvml_index_for_cuda(0, UUIDS, {"CUDA_VISIBLE_DEVICES": "1,1"}) is None


def test_child_env_pins_one_gpu_by_uuid():
    env = child_env_for(2, UUIDS, env={"PATH": "/bin"})
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-cccc3333" and env["PATH"] == "/bin"
    assert nvml_index_for_cuda(0, UUIDS, env) == 2
