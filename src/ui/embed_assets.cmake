# Writes OUTPUT, a C++ source holding every file under DIR as bytes for files.hpp, so the web UI
# is in the binary (docs/ui.md). Run by CMake at build time: cmake -DDIR= -DHEADER= -DOUTPUT= -P.
file(GLOB_RECURSE files RELATIVE ${DIR} ${DIR}/*)
list(SORT files)
set(arrays "")
set(table "")
set(i 0)
foreach(name ${files})
  file(READ ${DIR}/${name} hex HEX)
  string(LENGTH "${hex}" digits)
  math(EXPR size "${digits} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND arrays "const unsigned char file_${i}[] = {${bytes}0};\n")
  string(APPEND table "        {\"${name}\", {reinterpret_cast<const char*>(file_${i}), ${size}}},\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE ${OUTPUT}.new "// Generated from ${DIR} by embed_assets.cmake: do not edit.\n#include \"${HEADER}\"\n\n"
     "namespace berth::ui {\nnamespace {\n${arrays}}  // namespace\n\n"
     "std::span<const File> files() {\n    static const File all[] = {\n${table}    };\n"
     "    return all;\n}\n\n}  // namespace berth::ui\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUTPUT}.new ${OUTPUT})
