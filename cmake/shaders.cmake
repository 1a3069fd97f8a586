# The Vulkan backend's shaders: src/gpu/shaders/matmul.comp compiled by glslc once per weight type (-DTYPE_<T>)
# and the other kernels once each, validated by spirv-val, and embedded by embed_spirv.cmake. Sets MOETIER_SHADER_CPP to the generated source.
# Product kernels exist for these types (names as quant::traits(t).name spells them).
set(MOETIER_PRODUCT_TYPES f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs mxfp4)
set(shader_dir ${PROJECT_SOURCE_DIR}/src/gpu/shaders)
set(spv_dir ${CMAKE_BINARY_DIR}/generated/spirv)
file(MAKE_DIRECTORY ${spv_dir})
file(GLOB shader_sources CONFIGURE_DEPENDS ${shader_dir}/*.comp ${shader_dir}/*.glsl)
set(spv_files "")
foreach(t ${MOETIER_PRODUCT_TYPES})
  string(TOUPPER ${t} T)
  set(spv ${spv_dir}/product_${t}.spv)
  add_custom_command(OUTPUT ${spv}
    COMMAND ${MOETIER_GLSLC} --target-env=vulkan1.2 -O -Werror -DTYPE_${T} ${shader_dir}/matmul.comp -o ${spv}
    COMMAND ${MOETIER_SPIRV_VAL} --target-env vulkan1.2 ${spv}
    DEPENDS ${shader_sources}
    COMMENT "Compiling the ${t} product shader")
  list(APPEND spv_files ${spv})
endforeach()
# The read-bandwidth kernel (moetier devices --bandwidth) and the device step's kernels (gpu/step.h).
set(MOETIER_OP_KERNELS read rms_norm rope kv_store attention glu add round gather combine)
foreach(k ${MOETIER_OP_KERNELS})
  set(spv ${spv_dir}/${k}.spv)
  add_custom_command(OUTPUT ${spv}
    COMMAND ${MOETIER_GLSLC} --target-env=vulkan1.2 -O -Werror ${shader_dir}/${k}.comp -o ${spv}
    COMMAND ${MOETIER_SPIRV_VAL} --target-env vulkan1.2 ${spv}
    DEPENDS ${shader_dir}/${k}.comp ${shader_dir}/ops.glsl ${shader_dir}/half.glsl
    COMMENT "Compiling the ${k} shader")
  list(APPEND spv_files ${spv})
endforeach()
set(kernel_names ${MOETIER_OP_KERNELS})
foreach(t ${MOETIER_PRODUCT_TYPES})
  list(APPEND kernel_names product_${t})
endforeach()
string(REPLACE ";" "," type_names "${kernel_names}")
set(MOETIER_SHADER_CPP ${CMAKE_BINARY_DIR}/generated/gpu_shaders.cpp)
add_custom_command(OUTPUT ${MOETIER_SHADER_CPP}
  COMMAND ${CMAKE_COMMAND} -DDIR=${spv_dir} -DNAMES=${type_names} -DOUTPUT=${MOETIER_SHADER_CPP}
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_spirv.cmake
  DEPENDS ${spv_files} ${PROJECT_SOURCE_DIR}/cmake/embed_spirv.cmake
  COMMENT "Embedding the SPIR-V shaders")
