/* scalgraph runtime shim: the one header that defines the C API and the on-disk records.
 * It is also the cffi cdef for Python (so keep it free of preprocessor logic inside the
 * SG_CDEF_BEGIN/END region: plain typedefs, structs, enums and prototypes only).
 * The probe ABI is documented in docs/runtime-abi.md. */
#ifndef SCALGRAPH_H
#define SCALGRAPH_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* SG_CDEF_BEGIN */
struct sg_psg_tables {
    const char *psg_hash;
    uint32_t nvertices, nfunctions, ninstances;
    const uint32_t *inst_base;
    const uint32_t *inst_func;
    const uint32_t *inst_vid;
    const int32_t *inst_callee;
    const uint32_t *func_default_inst;
    uint32_t * const *fid_slots;
    const uint8_t *vertex_kind;
};
void sg_register_psg(const struct sg_psg_tables *t);
void sg_fn_enter(uint32_t fid);
void sg_fn_exit(void);
/* SG_CDEF_END */

extern __thread uint32_t sg_cur;

#ifdef __cplusplus
}
#endif
#endif
