"""The CPU's name tells generations apart even when a VM reports a bare "AMD EPYC"."""

from rlx_core.targets.cpu.identity import cpu_model, describe, microarchitecture

ZEN1 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu avx2 fma

processor\t: 1
model name\t: something else
"""


def test_generic_amd_name_gets_its_zen_generation():
    assert describe(ZEN1) == "AMD EPYC (Zen 1)"
    zen4 = ZEN1.replace("model\t\t: 1\n", "model\t\t: 17\n").replace("23", "25")
    assert describe(zen4) == "AMD EPYC (Zen 4)"
    assert describe(ZEN1.replace("model\t\t: 1\n", "model\t\t: 1\n").replace("23", "25")) \
        == "AMD EPYC (Zen 3)"


def test_specific_names_are_kept_as_they_are():
    assert describe(ZEN1.replace("AMD EPYC\n", "AMD EPYC 7B13\n")) == "AMD EPYC 7B13"
    assert describe("model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\n") \
        == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"


def test_unknown_generations_name_family_and_model():
    assert microarchitecture("GenuineIntel", 6, 1) == "family 6 model 1"
    generic = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 86\nmodel name\t: Intel Xeon Processor\n"
    assert describe(generic) == "Intel Xeon Processor (family 6 model 86)"


def test_generic_intel_name_gets_its_server_generation():
    emr = ("vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"
           "model name\t: Intel(R) Xeon(R) Processor\nstepping\t: 2\n")
    assert describe(emr) == "Intel(R) Xeon(R) Processor (Emerald Rapids)"
    assert microarchitecture("GenuineIntel", 6, 143) == "Sapphire Rapids"
    # model 0x55 is three generations, told apart by the stepping
    assert microarchitecture("GenuineIntel", 6, 85, 4) == "Skylake-SP"
    assert microarchitecture("GenuineIntel", 6, 85, 7) == "Cascade Lake"
    assert microarchitecture("GenuineIntel", 6, 85, 11) == "Cooper Lake"


def test_missing_fields_fall_back():
    assert describe("", "x86_64") == "x86_64"
    assert describe("model name\t: AMD EPYC\ncpu family\t: nope\n") == "AMD EPYC"
    assert cpu_model()  # never empty on any machine
