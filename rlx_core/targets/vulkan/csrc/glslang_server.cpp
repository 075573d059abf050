// glslang_server: compile many compute shaders to SPIR-V in one process.
//
// The same front end and SPIR-V generator as `glslangValidator -V` (GLSL) and
// `glslangValidator -V -D -S comp -e main` (HLSL), linked from Debian's glslang-dev, without
// starting a process per shader: glslangValidator spends ~0.2 s building its built-in symbol
// tables on every start, which dominated compiling a model for vulkan and directx.
//
// Protocol on stdin/stdout, little-endian u32 fields:
//   request:  language (0 GLSL, 1 HLSL), vulkan minor version (0 or 1), source length, source
//   reply:    status (0 SPIR-V follows, 1 error log follows), length, bytes
// The server exits at end of input.
#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

static bool read_exact(void* p, size_t n) { return n == 0 || fread(p, 1, n, stdin) == n; }

static void reply(uint32_t status, const void* data, size_t n) {
    uint32_t head[2] = {status, static_cast<uint32_t>(n)};
    fwrite(head, sizeof head[0], 2, stdout);
    if (n) fwrite(data, 1, n, stdout);
    fflush(stdout);
}

static void fail(const std::string& log) { reply(1, log.data(), log.size()); }

int main() {
    glslang::InitializeProcess();
    uint32_t head[3];
    while (read_exact(head, sizeof head)) {
        std::string source(head[2], '\0');
        if (!read_exact(&source[0], head[2])) break;
        const bool hlsl = head[0] == 1;
        const bool vk11 = head[1] == 1;
        const EShLanguage stage = EShLangCompute;
        glslang::TShader shader(stage);
        const char* text = source.c_str();
        const char* name = "k.comp";  // so the log reads "ERROR: k.comp:LINE: ..." as glslangValidator's
        shader.setStringsWithLengthsAndNames(&text, nullptr, &name, 1);
        shader.setEntryPoint("main");
        shader.setEnvInput(hlsl ? glslang::EShSourceHlsl : glslang::EShSourceGlsl, stage,
                           glslang::EShClientVulkan, 100);
        shader.setEnvClient(glslang::EShClientVulkan,
                            vk11 ? glslang::EShTargetVulkan_1_1 : glslang::EShTargetVulkan_1_0);
        shader.setEnvTarget(glslang::EShTargetSpv,
                            vk11 ? glslang::EShTargetSpv_1_3 : glslang::EShTargetSpv_1_0);
        const EShMessages messages = static_cast<EShMessages>(
            EShMsgSpvRules | EShMsgVulkanRules | (hlsl ? EShMsgReadHlsl : 0));
        if (!shader.parse(GetDefaultResources(), 100, false, messages)) {
            fail(std::string(shader.getInfoLog()) + shader.getInfoDebugLog());
            continue;
        }
        glslang::TProgram program;
        program.addShader(&shader);
        if (!program.link(messages)) {
            fail(std::string(program.getInfoLog()) + program.getInfoDebugLog());
            continue;
        }
        std::vector<unsigned int> spirv;
        spv::SpvBuildLogger logger;
        glslang::SpvOptions options;
        options.disableOptimizer = false;  // as glslangValidator: HLSL output is legalized
        glslang::GlslangToSpv(*program.getIntermediate(stage), spirv, &logger, &options);
        const std::string log = logger.getAllMessages();
        if (spirv.empty()) {
            fail("SPIR-V generation failed\n" + log);
            continue;
        }
        reply(0, spirv.data(), spirv.size() * sizeof(unsigned int));
    }
    glslang::FinalizeProcess();
    return 0;
}
