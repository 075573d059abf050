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
    assert microarchitecture("GenuineIntel", 6, 143) == "family 6 model 143"
    generic = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel Xeon Processor\n"
    assert describe(generic) == "Intel Xeon Processor (family 6 model 85)"


def test_missing_fields_fall_back():
    assert describe("", "x86_64") == "x86_64"
    assert describe("model name\t: AMD EPYC\ncpu family\t: nope\n") == "AMD EPYC"
    assert cpu_model()  # never empty on any machine
