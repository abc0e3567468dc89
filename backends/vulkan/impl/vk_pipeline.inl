/*
 * vk_pipeline.inl - one descriptor-set layout (4 storage buffers) and one pipeline layout
 * (128 bytes of push constants) shared by every shader; compute pipelines created once
 * per (shader, specialization value) and cached on the device.
 */
namespace {
namespace tsr_vk {

static bool create_pipeline_layout(device * d) {
    VkDescriptorSetLayoutBinding b[N_BINDINGS];
    for (uint32_t i = 0; i < N_BINDINGS; i++) {
        b[i] = VkDescriptorSetLayoutBinding{};
        b[i].binding = i;
        b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        b[i].descriptorCount = 1;
        b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dci{};
    dci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    dci.bindingCount = N_BINDINGS;
    dci.pBindings = b;
    VkResult r = vkCreateDescriptorSetLayout(d->dev, &dci, nullptr, &d->dsl);
    if (r != VK_SUCCESS) { d->dsl = VK_NULL_HANDLE; return tsr_set_error("Vulkan %s: vkCreateDescriptorSetLayout failed (%s)", d->name.c_str(), vk_result_str(r)); }
    if (d->props.limits.maxPushConstantsSize < PC_SIZE)
        return tsr_set_error("Vulkan %s: maxPushConstantsSize %u is below the %u bytes tessera needs", d->name.c_str(),
                             d->props.limits.maxPushConstantsSize, PC_SIZE);
    VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, PC_SIZE};
    VkPipelineLayoutCreateInfo lci{};
    lci.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    lci.setLayoutCount = 1;
    lci.pSetLayouts = &d->dsl;
    lci.pushConstantRangeCount = 1;
    lci.pPushConstantRanges = &pcr;
    r = vkCreatePipelineLayout(d->dev, &lci, nullptr, &d->layout);
    if (r != VK_SUCCESS) { d->layout = VK_NULL_HANDLE; return tsr_set_error("Vulkan %s: vkCreatePipelineLayout failed (%s)", d->name.c_str(), vk_result_str(r)); }
    return true;
}

/* The pipeline of shader `sh` with specialization constant 0 = spec; created on first use. */
static VkPipeline get_pipeline(device * d, int sh, uint32_t spec) {
    if (sh < 0 || sh >= SH_COUNT || spec >= static_cast<uint32_t>(MAX_SPEC)) {
        tsr_set_error("Vulkan: bad pipeline (%d, %u)", sh, spec);
        return VK_NULL_HANDLE;
    }
    std::lock_guard<std::recursive_mutex> lock(d->mutex);
    if (d->pipes[sh][spec]) return d->pipes[sh][spec];
    if (!d->modules[sh]) {
        VkShaderModuleCreateInfo mci{};
        mci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
        mci.codeSize = tsr_vk_shaders[sh].size;
        mci.pCode = tsr_vk_shaders[sh].code;
        VkResult r = vkCreateShaderModule(d->dev, &mci, nullptr, &d->modules[sh]);
        if (r != VK_SUCCESS) {
            d->modules[sh] = VK_NULL_HANDLE;
            tsr_set_error("Vulkan %s: vkCreateShaderModule(%s) failed (%s)", d->name.c_str(), shader_names[sh], vk_result_str(r));
            return VK_NULL_HANDLE;
        }
    }
    VkSpecializationMapEntry me{0, 0, sizeof(uint32_t)};
    VkSpecializationInfo si{1, &me, sizeof(uint32_t), &spec};
    VkComputePipelineCreateInfo cci{};
    cci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    cci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    cci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cci.stage.module = d->modules[sh];
    cci.stage.pName = "main";
    cci.stage.pSpecializationInfo = &si;
    cci.layout = d->layout;
    VkPipeline p = VK_NULL_HANDLE;
    VkResult r = vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &cci, nullptr, &p);
    if (r != VK_SUCCESS) {
        tsr_set_error("Vulkan %s: vkCreateComputePipelines(%s, %u) failed (%s)", d->name.c_str(), shader_names[sh], spec, vk_result_str(r));
        return VK_NULL_HANDLE;
    }
    d->pipes[sh][spec] = p;
    d->n_pipelines++;
    return p;
}

} // namespace tsr_vk
} // namespace
