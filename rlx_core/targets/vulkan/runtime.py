"""The Vulkan device: the ``vulkan`` cffi binding on the first physical device (Mesa lavapipe
without a GPU). The SPIR-V that glslang made from the generated GLSL is what runs.

Buffers live in host-visible, coherent memory mapped once, so uploads and downloads are
copies. Launches are recorded, not run: the next download (or upload) records them into one
command buffer, with a compute->compute/host memory barrier after each dispatch, submits it
once and waits on a fence. Pipelines are cached per source, descriptor sets per (pipeline,
buffers). A program's buffers are destroyed and their memory freed when the program is
released (``free``, called by gpu_common.runtime.GpuProgram's finalizer), with the descriptor
sets that named them; ``live`` counts the buffers alive.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.targets.gpu_common.kernels import GpuKernel
from rlx_core.targets.gpu_common.plan import AdapterInfo
from rlx_core.targets.gpu_common.runtime import source_key
from rlx_core.targets.vulkan.toolchain import to_spirv

# AdapterInfo feature of a device with compute-stage subgroup shuffles (not an extension name)
SUBGROUP_SHUFFLE = "subgroup-shuffle"
# ... of a device with VK_KHR_shader_integer_dot_product enabled (int8 kernels use OpSDot)
INTEGER_DOT = "shader-integer-dot-product"
_DOT_EXT = "VK_KHR_shader_integer_dot_product"


@dataclass
class VkBuffer:
    """A Vulkan buffer with its device memory and its host mapping."""

    buffer: Any
    memory: Any
    mapped: Any
    nbytes: int


@dataclass
class VkPipeline:
    """A compute pipeline with its pipeline layout and descriptor set layout."""

    pipeline: Any
    layout: Any
    set_layout: Any


class VulkanDevice:
    """One VkDevice with a compute queue (gpu_common.runtime.Device)."""

    stage = "comp"  # what glslang compiles (the directx target: "hlsl")
    api = "Vulkan"

    def __init__(self) -> None:
        import vulkan as vk

        self.vk = vk
        self.lock = threading.Lock()
        self._mu = threading.RLock()  # the caches and the pending list
        self.pipelines: dict[str, VkPipeline] = {}
        self.sets: dict[tuple[int, ...],
                        tuple[Any, VkPipeline, tuple[VkBuffer, ...], Any]] = {}
        self.pending: list[tuple[VkPipeline, Any, tuple[int, int, int]]] = []
        self.live = 0  # buffers allocated and not yet freed
        try:
            app = vk.VkApplicationInfo(pApplicationName="rlx", applicationVersion=1,
                                       pEngineName="rlx", engineVersion=1,
                                       apiVersion=vk.VK_MAKE_VERSION(1, 1, 0))
            self.instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(
                pApplicationInfo=app, enabledLayerCount=0, enabledExtensionCount=0), None)
            physical = vk.vkEnumeratePhysicalDevices(self.instance)
        except Exception as err:  # no loader, no ICD: the binding raises its own errors
            raise TargetUnavailableError(
                f"no Vulkan instance or device ({type(err).__name__} {err})") from None
        if not physical:
            raise TargetUnavailableError("no Vulkan physical device")
        self.physical = physical[0]
        props = vk.vkGetPhysicalDeviceProperties(self.physical)
        family = next((i for i, q in enumerate(
            vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical))
            if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT), None)
        if family is None:
            raise TargetUnavailableError(f"{props.deviceName} has no compute queue")
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=family, queueCount=1,
                                                pQueuePriorities=[1.0])
        exts = vk.vkEnumerateDeviceExtensionProperties(self.physical, None)
        features = sorted(e.extensionName for e in exts)
        dot = self._integer_dot(props, features)
        self.device = vk.vkCreateDevice(self.physical, vk.VkDeviceCreateInfo(
            queueCreateInfoCount=1, pQueueCreateInfos=[queue_info],
            enabledExtensionCount=1 if dot else 0,
            ppEnabledExtensionNames=[_DOT_EXT] if dot else None,
            pNext=vk.VkPhysicalDeviceShaderIntegerDotProductFeatures(
                sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
                shaderIntegerDotProduct=vk.VK_TRUE) if dot else None), None)
        self.queue = vk.vkGetDeviceQueue(self.device, family, 0)
        self.pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(
            queueFamilyIndex=family,
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT), None)
        self.fence = vk.vkCreateFence(self.device, vk.VkFenceCreateInfo(), None)
        self.descriptor_pools: list[Any] = []
        self._new_descriptor_pool()
        self.memory_type = self._host_memory_type()
        lim = props.limits
        if self._subgroup_shuffle(props):
            features.append(SUBGROUP_SHUFFLE)
        if dot:
            features.append(INTEGER_DOT)
        self.info = AdapterInfo(
            name=str(props.deviceName), features=tuple(features),
            max_storage_buffers=int(lim.maxPerStageDescriptorStorageBuffers),
            max_buffer_bytes=int(lim.maxStorageBufferRange),
            max_workgroup_size=int(lim.maxComputeWorkGroupInvocations),
            backend=f"Vulkan {props.apiVersion >> 22}.{(props.apiVersion >> 12) & 0x3ff}")

    def _integer_dot(self, props: Any, extensions: list[str]) -> bool:
        """Does the device have 4x8-bit packed integer dot products (the extension and its
        feature bit)? ``RLX_VULKAN_INTEGER_DOT=0`` leaves them off (int8 kernels unpack)."""
        vk = self.vk
        if _DOT_EXT not in extensions or props.apiVersion < vk.VK_MAKE_VERSION(1, 1, 0) or \
                os.environ.get("RLX_VULKAN_INTEGER_DOT", "1") == "0":
            return False
        feat = vk.VkPhysicalDeviceShaderIntegerDotProductFeatures(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES)
        vk.vkGetPhysicalDeviceFeatures2(self.physical, vk.VkPhysicalDeviceFeatures2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=feat))
        return bool(feat.shaderIntegerDotProduct)

    def _subgroup_shuffle(self, props: Any) -> bool:
        """Does the device shuffle across a subgroup in compute shaders (Vulkan 1.1 core)?"""
        vk = self.vk
        if props.apiVersion < vk.VK_MAKE_VERSION(1, 1, 0) or os.environ.get(
                "RLX_VULKAN_SUBGROUPS", "1") == "0":
            return False
        sub = vk.VkPhysicalDeviceSubgroupProperties(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES)
        vk.vkGetPhysicalDeviceProperties2(self.physical, vk.VkPhysicalDeviceProperties2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=sub))
        return bool(sub.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT
                    and sub.supportedOperations & vk.VK_SUBGROUP_FEATURE_SHUFFLE_BIT)

    # ---- memory ----------------------------------------------------------------------------

    def _host_memory_type(self) -> int:
        vk = self.vk
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        mp = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        for i in range(mp.memoryTypeCount):
            if mp.memoryTypes[i].propertyFlags & want == want:
                return i
        raise TargetUnavailableError("no host-visible coherent Vulkan memory")

    def alloc(self, nbytes: int) -> VkBuffer:
        vk = self.vk
        buf = vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(
            size=nbytes, usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(self.device, buf)
        mem = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(
            allocationSize=req.size, memoryTypeIndex=self.memory_type), None)
        vk.vkBindBufferMemory(self.device, buf, mem, 0)
        mapped = vk.vkMapMemory(self.device, mem, 0, nbytes, 0)
        with self._mu:
            self.live += 1
        return VkBuffer(buf, mem, mapped, nbytes)

    def free(self, buffers: list[VkBuffer]) -> None:
        """Destroy ``buffers`` and free their memory, after any launch recorded on them has run;
        the cached descriptor sets that name one go too (freed back to their pool)."""
        vk = self.vk
        self.flush()
        with self._mu:
            gone = {id(b) for b in buffers}
            for key, (ds, _p, bufs, pool) in list(self.sets.items()):
                if any(id(b) in gone for b in bufs):
                    del self.sets[key]
                    vk.vkFreeDescriptorSets(self.device, pool, 1, [ds])
            for b in buffers:
                if b.buffer is None:
                    continue
                vk.vkUnmapMemory(self.device, b.memory)
                vk.vkDestroyBuffer(self.device, b.buffer, None)
                vk.vkFreeMemory(self.device, b.memory, None)
                b.buffer = b.memory = b.mapped = None
                self.live -= 1

    def upload(self, buf: VkBuffer, data: bytes) -> None:
        self.flush()  # a launch recorded earlier may still read the old contents
        buf.mapped[0:len(data)] = data

    def download(self, buf: VkBuffer, nbytes: int) -> bytes:
        self.flush()
        return bytes(buf.mapped[0:nbytes])

    # ---- pipelines -----------------------------------------------------------------------------

    def compile(self, kernels: list[GpuKernel]) -> list[VkPipeline]:
        return [self._pipeline(k) for k in kernels]

    def _pipeline(self, k: GpuKernel) -> VkPipeline:
        key = source_key(k.source)
        with self._mu:
            if key in self.pipelines:
                return self.pipelines[key]
        spirv = to_spirv(k.name, k.source, self.stage, self.api)
        vk, dev = self.vk, self.device
        module = vk.vkCreateShaderModule(dev, vk.VkShaderModuleCreateInfo(
            codeSize=len(spirv), pCode=spirv), None)
        n = len(k.reads) + len(k.writes)
        bindings = [vk.VkDescriptorSetLayoutBinding(
            binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=1,
            stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT) for i in range(n)]
        set_layout = vk.vkCreateDescriptorSetLayout(dev, vk.VkDescriptorSetLayoutCreateInfo(
            bindingCount=n, pBindings=bindings), None)
        layout = vk.vkCreatePipelineLayout(dev, vk.VkPipelineLayoutCreateInfo(
            setLayoutCount=1, pSetLayouts=[set_layout]), None)
        stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                                                   module=module, pName="main")
        pipe = vk.vkCreateComputePipelines(dev, None, 1, [vk.VkComputePipelineCreateInfo(
            stage=stage, layout=layout)], None)
        vk.vkDestroyShaderModule(dev, module, None)
        p = VkPipeline(pipe[0], layout, set_layout)
        with self._mu:
            return self.pipelines.setdefault(key, p)

    def _new_descriptor_pool(self) -> None:
        vk = self.vk
        self.descriptor_pools.append(vk.vkCreateDescriptorPool(
            self.device, vk.VkDescriptorPoolCreateInfo(
                flags=vk.VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
                maxSets=1024, poolSizeCount=1, pPoolSizes=[vk.VkDescriptorPoolSize(
                    type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=1024 * 16)]),
            None))

    def _descriptor_set(self, p: VkPipeline, buffers: list[VkBuffer]) -> Any:
        vk = self.vk
        # keyed by identity, so the cache holds the buffers themselves: were they freed, a new
        # buffer could take a dead one's id() and be handed the old buffer's descriptor set
        # (seen as wrong answers that depended on which programs ran before in the process)
        key = (id(p), *(id(b) for b in buffers))
        hit = self.sets.get(key)
        if hit is not None and hit[1] is p and all(
                a is b for a, b in zip(hit[2], buffers, strict=True)):
            return hit[0]
        try:
            ds = vk.vkAllocateDescriptorSets(self.device, vk.VkDescriptorSetAllocateInfo(
                descriptorPool=self.descriptor_pools[-1], descriptorSetCount=1,
                pSetLayouts=[p.set_layout]))[0]
        except vk.VkErrorOutOfPoolMemory:
            self._new_descriptor_pool()
            return self._descriptor_set(p, buffers)
        writes = [vk.VkWriteDescriptorSet(
            dstSet=ds, dstBinding=i, descriptorCount=1,
            descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=b.buffer, offset=0, range=b.nbytes)])
            for i, b in enumerate(buffers)]
        vk.vkUpdateDescriptorSets(self.device, len(writes), writes, 0, None)
        self.sets[key] = (ds, p, tuple(buffers), self.descriptor_pools[-1])
        return ds

    # ---- launches ------------------------------------------------------------------------------

    def launch(self, handle: VkPipeline, kernel: GpuKernel, buffers: list[VkBuffer]) -> None:
        with self._mu:
            self.pending.append((handle, self._descriptor_set(handle, buffers),
                                 kernel.workgroups))

    def flush(self) -> None:
        """Run every recorded launch: one command buffer, one submit, wait."""
        vk = self.vk
        with self._mu:
            if not self.pending:
                return
            steps, self.pending = self.pending, []
            cb = vk.vkAllocateCommandBuffers(self.device, vk.VkCommandBufferAllocateInfo(
                commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                commandBufferCount=1))[0]
            vk.vkBeginCommandBuffer(cb, vk.VkCommandBufferBeginInfo(
                flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
            barrier = vk.VkMemoryBarrier(
                srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT,
                dstAccessMask=(vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
                               | vk.VK_ACCESS_HOST_READ_BIT))
            for p, ds, (x, y, z) in steps:
                vk.vkCmdBindPipeline(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline)
                vk.vkCmdBindDescriptorSets(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0,
                                           1, [ds], 0, None)
                vk.vkCmdDispatch(cb, x, y, z)
                vk.vkCmdPipelineBarrier(
                    cb, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                    vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_HOST_BIT,
                    0, 1, [barrier], 0, None, 0, None)
            vk.vkEndCommandBuffer(cb)
            vk.vkQueueSubmit(self.queue, 1, [vk.VkSubmitInfo(
                commandBufferCount=1, pCommandBuffers=[cb])], self.fence)
            vk.vkWaitForFences(self.device, 1, [self.fence], vk.VK_TRUE, 0xFFFFFFFFFFFFFFFF)
            vk.vkResetFences(self.device, 1, [self.fence])
            vk.vkFreeCommandBuffers(self.device, self.pool, 1, [cb])
