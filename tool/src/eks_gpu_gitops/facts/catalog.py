"""EC2 instance catalogue: GPUs and EFA interfaces per instance type.

Figures come from EC2 DescribeInstanceTypes (via Karpenter's generated instance-types
reference); `efa_interfaces` is the value a node advertises as `vpc.amazonaws.com/efa`
when its node group has `efaEnabled`. This table is the one source of truth for the
template's questions, its hooks, the validator's rules and the generators.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: int
    gpus: int
    gpu_model: str
    gpu_memory_mib: int
    efa_interfaces: int

    @property
    def has_efa(self) -> bool:
        return self.efa_interfaces > 0

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def trainer_image_supported(self) -> bool:
        return self.gpu_model not in BLACKWELL_GPUS


# GPUs the trainer image cannot drive. Blackwell needs CUDA 12.8 (B200, sm_100) or 12.9 (B300,
# sm_103) and cuDNN 9; the image stays on TensorFlow 2.15 (Keras 2, which Horovod 0.28.1 needs),
# built on CUDA 12.2 and cuDNN 8.9 (tensorflow.org, tested build configurations). Its wheel holds
# code for sm_50 to sm_80 and compute_80 PTX only, and CUDA 12.2 cannot build the image's NCCL and
# Horovod kernels for sm_100. See trainer/Dockerfile.
BLACKWELL_GPUS = ("B200", "B300")


_GPU_TYPES = (
    InstanceType(
        "p3.2xlarge", vcpus=8, memory_gib=61, gpus=1, gpu_model="V100", gpu_memory_mib=16384, efa_interfaces=0
    ),
    InstanceType(
        "p3.8xlarge", vcpus=32, memory_gib=244, gpus=4, gpu_model="V100", gpu_memory_mib=16384, efa_interfaces=0
    ),
    InstanceType(
        "p3.16xlarge", vcpus=64, memory_gib=488, gpus=8, gpu_model="V100", gpu_memory_mib=16384, efa_interfaces=0
    ),
    InstanceType("g4dn.xlarge", vcpus=4, memory_gib=16, gpus=1, gpu_model="T4", gpu_memory_mib=16384, efa_interfaces=0),
    InstanceType(
        "g4dn.2xlarge", vcpus=8, memory_gib=32, gpus=1, gpu_model="T4", gpu_memory_mib=16384, efa_interfaces=0
    ),
    InstanceType(
        "g4dn.4xlarge", vcpus=16, memory_gib=64, gpus=1, gpu_model="T4", gpu_memory_mib=16384, efa_interfaces=0
    ),
    InstanceType(
        "g4dn.8xlarge", vcpus=32, memory_gib=128, gpus=1, gpu_model="T4", gpu_memory_mib=16384, efa_interfaces=1
    ),
    InstanceType(
        "g4dn.12xlarge", vcpus=48, memory_gib=192, gpus=4, gpu_model="T4", gpu_memory_mib=16384, efa_interfaces=1
    ),
    InstanceType(
        "g4dn.16xlarge", vcpus=64, memory_gib=256, gpus=1, gpu_model="T4", gpu_memory_mib=16384, efa_interfaces=1
    ),
    InstanceType(
        "g4dn.metal", vcpus=96, memory_gib=384, gpus=8, gpu_model="T4", gpu_memory_mib=16384, efa_interfaces=1
    ),
    InstanceType("g5.xlarge", vcpus=4, memory_gib=16, gpus=1, gpu_model="A10G", gpu_memory_mib=22888, efa_interfaces=0),
    InstanceType(
        "g5.2xlarge", vcpus=8, memory_gib=32, gpus=1, gpu_model="A10G", gpu_memory_mib=22888, efa_interfaces=0
    ),
    InstanceType(
        "g5.4xlarge", vcpus=16, memory_gib=64, gpus=1, gpu_model="A10G", gpu_memory_mib=22888, efa_interfaces=0
    ),
    InstanceType(
        "g5.8xlarge", vcpus=32, memory_gib=128, gpus=1, gpu_model="A10G", gpu_memory_mib=22888, efa_interfaces=1
    ),
    InstanceType(
        "g5.12xlarge", vcpus=48, memory_gib=192, gpus=4, gpu_model="A10G", gpu_memory_mib=22888, efa_interfaces=1
    ),
    InstanceType(
        "g5.16xlarge", vcpus=64, memory_gib=256, gpus=1, gpu_model="A10G", gpu_memory_mib=22888, efa_interfaces=1
    ),
    InstanceType(
        "g5.24xlarge", vcpus=96, memory_gib=384, gpus=4, gpu_model="A10G", gpu_memory_mib=22888, efa_interfaces=1
    ),
    InstanceType(
        "g5.48xlarge", vcpus=192, memory_gib=768, gpus=8, gpu_model="A10G", gpu_memory_mib=22888, efa_interfaces=1
    ),
    InstanceType("g6.xlarge", vcpus=4, memory_gib=16, gpus=1, gpu_model="L4", gpu_memory_mib=22888, efa_interfaces=0),
    InstanceType("g6.2xlarge", vcpus=8, memory_gib=32, gpus=1, gpu_model="L4", gpu_memory_mib=22888, efa_interfaces=0),
    InstanceType("g6.4xlarge", vcpus=16, memory_gib=64, gpus=1, gpu_model="L4", gpu_memory_mib=22888, efa_interfaces=0),
    InstanceType(
        "g6.8xlarge", vcpus=32, memory_gib=128, gpus=1, gpu_model="L4", gpu_memory_mib=22888, efa_interfaces=1
    ),
    InstanceType(
        "g6.12xlarge", vcpus=48, memory_gib=192, gpus=4, gpu_model="L4", gpu_memory_mib=22888, efa_interfaces=1
    ),
    InstanceType(
        "g6.16xlarge", vcpus=64, memory_gib=256, gpus=1, gpu_model="L4", gpu_memory_mib=22888, efa_interfaces=1
    ),
    InstanceType(
        "g6.24xlarge", vcpus=96, memory_gib=384, gpus=4, gpu_model="L4", gpu_memory_mib=22888, efa_interfaces=1
    ),
    InstanceType(
        "g6.48xlarge", vcpus=192, memory_gib=768, gpus=8, gpu_model="L4", gpu_memory_mib=22888, efa_interfaces=1
    ),
    InstanceType(
        "g6e.xlarge", vcpus=4, memory_gib=32, gpus=1, gpu_model="L40S", gpu_memory_mib=45776, efa_interfaces=0
    ),
    InstanceType(
        "g6e.2xlarge", vcpus=8, memory_gib=64, gpus=1, gpu_model="L40S", gpu_memory_mib=45776, efa_interfaces=0
    ),
    InstanceType(
        "g6e.4xlarge", vcpus=16, memory_gib=128, gpus=1, gpu_model="L40S", gpu_memory_mib=45776, efa_interfaces=0
    ),
    InstanceType(
        "g6e.8xlarge", vcpus=32, memory_gib=256, gpus=1, gpu_model="L40S", gpu_memory_mib=45776, efa_interfaces=1
    ),
    InstanceType(
        "g6e.12xlarge", vcpus=48, memory_gib=384, gpus=4, gpu_model="L40S", gpu_memory_mib=45776, efa_interfaces=1
    ),
    InstanceType(
        "g6e.16xlarge", vcpus=64, memory_gib=512, gpus=1, gpu_model="L40S", gpu_memory_mib=45776, efa_interfaces=1
    ),
    InstanceType(
        "g6e.24xlarge", vcpus=96, memory_gib=768, gpus=4, gpu_model="L40S", gpu_memory_mib=45776, efa_interfaces=2
    ),
    InstanceType(
        "g6e.48xlarge", vcpus=192, memory_gib=1536, gpus=8, gpu_model="L40S", gpu_memory_mib=45776, efa_interfaces=4
    ),
    InstanceType(
        "p3dn.24xlarge", vcpus=96, memory_gib=768, gpus=8, gpu_model="V100", gpu_memory_mib=32768, efa_interfaces=1
    ),
    InstanceType(
        "p4d.24xlarge", vcpus=96, memory_gib=1152, gpus=8, gpu_model="A100", gpu_memory_mib=40960, efa_interfaces=4
    ),
    InstanceType(
        "p4de.24xlarge", vcpus=96, memory_gib=1152, gpus=8, gpu_model="A100", gpu_memory_mib=81920, efa_interfaces=4
    ),
    InstanceType(
        "p5.4xlarge", vcpus=16, memory_gib=256, gpus=1, gpu_model="H100", gpu_memory_mib=81920, efa_interfaces=1
    ),
    InstanceType(
        "p5.48xlarge", vcpus=192, memory_gib=2048, gpus=8, gpu_model="H100", gpu_memory_mib=81920, efa_interfaces=32
    ),
    InstanceType(
        "p5e.48xlarge", vcpus=192, memory_gib=2048, gpus=8, gpu_model="H200", gpu_memory_mib=144384, efa_interfaces=32
    ),
    InstanceType(
        "p5en.48xlarge", vcpus=192, memory_gib=2048, gpus=8, gpu_model="H200", gpu_memory_mib=144384, efa_interfaces=16
    ),
    InstanceType(
        "p6-b200.48xlarge",
        vcpus=192,
        memory_gib=2048,
        gpus=8,
        gpu_model="B200",
        gpu_memory_mib=183359,
        efa_interfaces=8,
    ),
    InstanceType(
        "p6-b300.48xlarge",
        vcpus=192,
        memory_gib=4096,
        gpus=8,
        gpu_model="B300",
        gpu_memory_mib=275040,
        efa_interfaces=16,
    ),
)

# CPU types the template uses or users commonly pick for the system node group.
# They are known so that a GPU question answered with one gets "has no GPU", not "unknown".
_CPU_TYPES = (
    InstanceType("m5.large", vcpus=2, memory_gib=8, gpus=0, gpu_model="", gpu_memory_mib=0, efa_interfaces=0),
    InstanceType("m5.xlarge", vcpus=4, memory_gib=16, gpus=0, gpu_model="", gpu_memory_mib=0, efa_interfaces=0),
    InstanceType("m5.2xlarge", vcpus=8, memory_gib=32, gpus=0, gpu_model="", gpu_memory_mib=0, efa_interfaces=0),
    InstanceType("m6i.xlarge", vcpus=4, memory_gib=16, gpus=0, gpu_model="", gpu_memory_mib=0, efa_interfaces=0),
    InstanceType("m6i.2xlarge", vcpus=8, memory_gib=32, gpus=0, gpu_model="", gpu_memory_mib=0, efa_interfaces=0),
    InstanceType("m7i.xlarge", vcpus=4, memory_gib=16, gpus=0, gpu_model="", gpu_memory_mib=0, efa_interfaces=0),
    InstanceType("c5.2xlarge", vcpus=8, memory_gib=16, gpus=0, gpu_model="", gpu_memory_mib=0, efa_interfaces=0),
    InstanceType("c5n.18xlarge", vcpus=72, memory_gib=192, gpus=0, gpu_model="", gpu_memory_mib=0, efa_interfaces=1),
    InstanceType("t3.large", vcpus=2, memory_gib=8, gpus=0, gpu_model="", gpu_memory_mib=0, efa_interfaces=0),
)

INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in _GPU_TYPES + _CPU_TYPES}
GPU_INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in _GPU_TYPES}


def lookup(name: str) -> InstanceType | None:
    return INSTANCE_TYPES.get(name)
