"""HAMi's annotations, byte for byte. The literal strings are HAMi v2.10.0's own test vectors
(the file each comes from is named next to it); rota must read what HAMi reads and write what
HAMi's scheduler writes, so that HAMi's device plugin serves rota's Pods.
"""

from datetime import datetime, timedelta, timezone

import pytest

from rota.backends.kube import hami
from rota.backends.kube.hami import ContainerDevice, HamiDevice
from kubekit import hami_devices
from rota.core import InvalidSpec

# pkg/device/nvidia/device_test.go, Test_GetNodeDevices
P4 = ('[{"id":"GPU-0","count":5,"devmem":8192,"devcore":100,"type":"NVIDIA-Tesla P4","numa":0,'
      '"health":true,"index":0}]')
# pkg/device/nvidia/device_test.go, TestGetNodeDevices_PairScores
TWO_V100 = ('[{"id":"GPU-0","count":1,"devmem":8192,"devcore":100,"type":"NVIDIA-V100",'
            '"health":true},{"id":"GPU-1","count":1,"devmem":8192,"devcore":100,'
            '"type":"NVIDIA-V100","health":true}]')
# pkg/device/nvidia/device_test.go, TestGetNodeDevices_MigProfilesFromNode
MIG = ('[{"id":"GPU-0","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB",'
       '"numa":0,"health":true,"mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":5120,'
       '"core":14,"sliceCount":1,"instanceCount":7,"multiprocessorCount":14,'
       '"placements":[{"start":6,"size":1}]}]}]')
# pkg/device/devices_test.go, TestUnMarshalNodeDevices (note the trailing newline)
UNMARSHAL_TWO = ('[{"index":1,"id":"id-1","count":1,"devmem":1024,"devcore":10,"type":"type",'
                 '"health":true},{"index":2,"id":"id-2","count":2,"devmem":4096,"devcore":20,'
                 '"type":"type2","health":false}]')


def test_the_register_annotation_reads_as_get_node_devices_reads_it():
    assert hami.decode_node_devices(P4) == (
        HamiDevice(uuid="GPU-0", index=0, count=5, memory_mib=8192, cores=100,
                   type="NVIDIA-Tesla P4", numa=0, mode="", health=True),)
    assert [d.uuid for d in hami.decode_node_devices(TWO_V100)] == ["GPU-0", "GPU-1"]
    assert hami.decode_node_devices(UNMARSHAL_TWO)[1] == HamiDevice(
        uuid="id-2", index=2, count=2, memory_mib=4096, cores=20, type="type2", health=False)
    single = ('[{"index":1,"id":"id-1","count":1,"devmem":1024,"devcore":10,"type":"type",'
              '"health":true}]\n')
    assert hami.decode_node_devices(single)[0].index == 1


def test_mig_devices_keep_their_mode_and_profile_count():
    (device,) = hami.decode_node_devices(MIG)
    assert (device.mode, device.mig_profiles, device.count) == ("mig", 1, 7)


@pytest.mark.parametrize("text", ["[]", "null"])
def test_an_empty_register_annotation_has_no_devices(text):
    assert hami.decode_node_devices(text) == ()


def test_keys_match_as_go_matches_them():
    # exact name first, else case-insensitive; unknown keys ignored; null leaves the zero value
    text = ('[{"ID":"GPU-9","Count":2,"DEVMEM":100,"devcore":null,"type":"T","health":true,'
            '"extra":{"x":1},"devicevendor":"NVIDIA","custominfo":{"a":1}}]')
    (device,) = hami.decode_node_devices(text)
    assert (device.uuid, device.count, device.memory_mib, device.cores) == ("GPU-9", 2, 100, 0)


def test_a_repeated_key_keeps_the_last_value_but_a_later_null_leaves_the_earlier():
    (device,) = hami.decode_node_devices('[{"id":"a","id":"b","count":3,"count":null}]')
    assert (device.uuid, device.count) == ("b", 3)


@pytest.mark.parametrize("text, field", [
    ("not-valid-json", "hami.io/node-nvidia-register"),     # TestGetNodeDevices_InvalidJSON
    ('{"id":"GPU-0"}', "hami.io/node-nvidia-register"),      # an object, not a list
    ('[1]', "hami.io/node-nvidia-register[0]"),
    ('[null]', "hami.io/node-nvidia-register[0]"),  # Go reads a nil device; HAMi then fails
    ('[{"count":"5"}]', "hami.io/node-nvidia-register[0].count"),
    ('[{"count":1.0}]', "hami.io/node-nvidia-register[0].count"),
    ('[{"count":2147483648}]', "hami.io/node-nvidia-register[0].count"),  # beyond int32
    ('[{"index":-1}]', "hami.io/node-nvidia-register[0].index"),          # uint
    ('[{"health":"true"}]', "hami.io/node-nvidia-register[0].health"),
    ('[{"id":7}]', "hami.io/node-nvidia-register[0].id"),
    ('[{"migProfiles":{}}]', "hami.io/node-nvidia-register[0].migProfiles"),
    ('[{"devmem":NaN}]', "hami.io/node-nvidia-register"),
])
def test_what_go_refuses_is_refused_naming_the_place(text, field):
    with pytest.raises(InvalidSpec) as err:
        hami.decode_node_devices(text)
    assert err.value.field == field


def test_the_register_annotation_is_written_as_marshal_node_devices_writes_it():
    # Go's json.Marshal of DeviceInfo: struct field order, compact, omitempty (index 0, numa 0,
    # an empty mode and health false are left out); the same devices as HAMi's
    # TestMarshalNodeDevices "test multiple" case
    devices = [HamiDevice(uuid="id-1", index=1, count=1, memory_mib=1024, cores=10, type="type",
                          numa=0, health=True),
               HamiDevice(uuid="id-2", index=2, count=2, memory_mib=2048, cores=20, type="type2",
                          numa=1, health=False)]
    text = hami.encode_node_devices(devices)
    assert text == ('[{"id":"id-1","index":1,"count":1,"devmem":1024,"devcore":10,"type":"type",'
                    '"health":true},{"id":"id-2","index":2,"count":2,"devmem":2048,'
                    '"devcore":20,"type":"type2","numa":1}]')
    assert hami.decode_node_devices(text) == tuple(devices)
    assert hami.encode_node_devices([]) == "[]"


def test_the_register_annotation_of_the_test_nodes_is_what_hamis_plugin_writes():
    # produced by running HAMi v2.10.0's MarshalNodeDevices on the same two devices
    assert hami.encode_node_devices(hami_devices(2)) == (
        '[{"id":"GPU-a100-0","count":10,"devmem":81920,"devcore":100,'
        '"type":"NVIDIA A100-SXM4-80GB","mode":"hami-core","health":true},'
        '{"id":"GPU-a100-1","index":1,"count":10,"devmem":81920,"devcore":100,'
        '"type":"NVIDIA A100-SXM4-80GB","mode":"hami-core","health":true}]')


def test_go_escapes_html_characters_in_strings():
    device = HamiDevice(uuid="GPU-<&>", index=0, count=1, memory_mib=1, cores=100, type="T")
    assert '"id":"GPU-\\u003c\\u0026\\u003e"' in hami.encode_node_devices([device])


# pkg/device/devices_test.go, Test_DecodePodDevices: two containers, one device each
TWO_CONTAINERS = ("GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76,NVIDIA,500,3:;"
                  "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,NVIDIA,500,3:;")


def test_pod_devices_encode_as_encode_pod_single_device():
    containers = [[ContainerDevice("GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76", 500, 3)],
                  [ContainerDevice("GPU-ebe7c3f7-303d-558d-435e-99a160631fe4", 500, 3)]]
    assert hami.encode_pod_devices(containers) == TWO_CONTAINERS
    # devices_test.go: "UUID1,Type1,1000,30:UUID2,Type1,1000,30:;" (one container, two devices)
    assert hami.encode_pod_devices([[ContainerDevice("UUID1", 1000, 30, "Type1"),
                                     ContainerDevice("UUID2", 1000, 30, "Type1")]]) == \
        "UUID1,Type1,1000,30:UUID2,Type1,1000,30:;"
    # alloc_refactor_test.go: "GPU-aaa,NVIDIA,3000,50:;"
    assert hami.encode_pod_devices([[ContainerDevice("GPU-aaa", 3000, 50)]]) == \
        "GPU-aaa,NVIDIA,3000,50:;"
    # util_test.go: two init containers without devices, then the main one
    assert hami.encode_pod_devices([[], [], [ContainerDevice("GPU-main1", 2000, 50)]]) == \
        ";;GPU-main1,NVIDIA,2000,50:;"


def test_pod_devices_decode_as_decode_pod_devices_keeping_the_trailing_empty_container():
    assert hami.decode_pod_devices(TWO_CONTAINERS) == (
        (ContainerDevice("GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76", 500, 3),),
        (ContainerDevice("GPU-ebe7c3f7-303d-558d-435e-99a160631fe4", 500, 3),),
        (),
    )
    # util_test.go: "GPU-init1,NVIDIA,500,10:;;" -> the init container, the main one, the tail
    assert hami.decode_pod_devices("GPU-init1,NVIDIA,500,10:;;") == (
        (ContainerDevice("GPU-init1", 500, 10),), (), ())
    assert hami.decode_pod_devices("") == ((),)


def test_a_pod_entry_with_too_few_fields_is_refused():
    # devices_test.go, TestDecodePodDevices_BadAnnotation
    with pytest.raises(InvalidSpec, match="has 3 fields") as err:
        hami.decode_pod_devices("uuid,type,100:;")
    assert err.value.field == "hami.io/vgpu-devices-to-allocate"


@pytest.mark.parametrize("text", ["u,NVIDIA,x,1:;", "u,NVIDIA,1,2147483648:;", "u,NVIDIA,,1:;"])
def test_pod_numbers_must_be_32_bit_integers(text):
    with pytest.raises(InvalidSpec, match="invalid"):
        hami.decode_pod_devices(text)


def test_a_plus_sign_is_a_number_as_go_parse_int_reads_it():
    assert hami.decode_pod_devices("u,NVIDIA,+5,1:;") == ((ContainerDevice("u", 5, 1),), ())


def test_the_scheduler_annotations_and_label_of_a_half_gpu_pod():
    # what HAMi's Filter and Bind write for one container given half of GPU-aaa
    annotations = hami.allocation_annotations(
        "node-1", [[ContainerDevice("GPU-aaa", 40960, 50)]], now_s=1_780_000_000.7)
    assert annotations == {
        "hami.io/vgpu-node": "node-1",
        "hami.io/vgpu-time": "1780000000",
        "hami.io/vgpu-devices-to-allocate": "GPU-aaa,NVIDIA,40960,50:;",
        "hami.io/vgpu-devices-allocated": "GPU-aaa,NVIDIA,40960,50:;",
    }
    assert hami.allocation_labels("node-1") == {"hami.io/vgpu-node": "node-1"}
    assert hami.bind_annotations(1_780_000_001) == {
        "hami.io/bind-phase": "allocating", "hami.io/bind-time": "1780000001"}


def test_the_node_lock_is_written_and_read_as_nodelock_does():
    # pkg/util/nodelock/nodelock_test.go: "2026-08-01T06:00:00Z,ns,pod-a"
    when = datetime(2026, 8, 1, 6, 0, 0, tzinfo=timezone.utc)
    assert hami.node_lock_value(when, "ns", "pod-a") == "2026-08-01T06:00:00Z,ns,pod-a"
    assert hami.parse_node_lock("2026-08-01T06:00:00Z,ns,pod-a") == (when, "ns", "pod-a")
    assert hami.parse_node_lock("2026-08-01T06:00:00Z") == (when, "", "")  # a legacy lock
    cet = timezone(timedelta(hours=2))
    assert hami.node_lock_value(when.astimezone(cet), "ns", "p") == "2026-08-01T08:00:00+02:00,ns,p"


@pytest.mark.parametrize("value", ["2026-08-01T06:00:00Z,ns", "yesterday", "2026-08-01,ns,p"])
def test_a_malformed_node_lock_is_refused(value):
    with pytest.raises(InvalidSpec) as err:
        hami.parse_node_lock(value)
    assert err.value.field == "hami.io/mutex.lock"


def test_a_lock_time_must_carry_its_zone():
    with pytest.raises(InvalidSpec, match="time zone"):
        hami.node_lock_value(datetime(2026, 8, 1), "ns", "p")


def test_device_cordon_lists_uuids_skipping_blanks():
    annotations = {"hami.io/device-cordon": " GPU-1, ,GPU-2,,"}
    assert hami.cordoned_devices(annotations) == {"GPU-1", "GPU-2"}
    assert hami.cordoned_devices({}) == frozenset()
