/*
 * backend_impl.h - for backend writers only (ggml-backend-impl.h): the tables a backend
 * fills in and the bodies of the handles that backend.h keeps opaque. A program that
 * uses backends includes backend.h; a backend (tessera's CPU, Vulkan and CUDA, or your
 * own) includes this header as well.
 *
 * TSR_BACKEND_API_VERSION is bumped whenever a table below changes. A backend puts the
 * version it was written against into its tsr_backend_reg; tsr_backend_register refuses
 * a registration of another version, so a backend built against old tables is reported
 * instead of being called through the wrong slots.
 */
#ifndef TESSERA_BACKEND_IMPL_H
#define TESSERA_BACKEND_IMPL_H

#include "tessera.h"
#include "backend.h"

#define TSR_BACKEND_API_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

struct tsr_backend_buffer_type_i {
    const char *         (*get_name)      (tsr_backend_buffer_type_t buft);
    tsr_backend_buffer_t (*alloc_buffer)  (tsr_backend_buffer_type_t buft, size_t size);  /* NULL + tsr_set_error on failure */
    size_t               (*get_alignment) (tsr_backend_buffer_type_t buft);
    size_t               (*get_max_size)  (tsr_backend_buffer_type_t buft);               /* optional: SIZE_MAX */
    size_t               (*get_alloc_size)(tsr_backend_buffer_type_t buft, const struct tsr_tensor * tensor); /* optional: nbytes */
    bool                 (*is_host)       (tsr_backend_buffer_type_t buft);               /* optional: false */
};

struct tsr_backend_buffer_type {
    struct tsr_backend_buffer_type_i iface;
    void * context;
};

struct tsr_backend_buffer_i {
    void   (*free_buffer)  (tsr_backend_buffer_t buffer);                                 /* optional */
    void * (*get_base)     (tsr_backend_buffer_t buffer);  /* an address, possibly opaque (device) */
    bool   (*init_tensor)  (tsr_backend_buffer_t buffer, struct tsr_tensor * tensor);     /* optional */
    bool   (*memset_tensor)(tsr_backend_buffer_t buffer, struct tsr_tensor * tensor, uint8_t value, size_t offset, size_t size);
    bool   (*set_tensor)   (tsr_backend_buffer_t buffer, struct tsr_tensor * tensor, const void * data, size_t offset, size_t size);
    bool   (*get_tensor)   (tsr_backend_buffer_t buffer, const struct tsr_tensor * tensor, void * data, size_t offset, size_t size);
    bool   (*cpy_tensor)   (tsr_backend_buffer_t buffer, const struct tsr_tensor * src, struct tsr_tensor * dst); /* optional: false = not handled */
    void   (*clear)        (tsr_backend_buffer_t buffer, uint8_t value);
};

struct tsr_backend_buffer {
    struct tsr_backend_buffer_i   iface;
    tsr_backend_buffer_type_t     buft;
    void *                        context;
    size_t                        size;
    enum tsr_backend_buffer_usage usage;
};

/* Create a buffer object (the caller's context is freed by iface.free_buffer). */
TSR_API tsr_backend_buffer_t tsr_backend_buffer_init(tsr_backend_buffer_type_t buft, struct tsr_backend_buffer_i iface,
                                                     void * context, size_t size);

struct tsr_backend_i {
    const char * (*get_name)(tsr_backend_t backend);
    void         (*free)(tsr_backend_t backend);
    tsr_backend_buffer_type_t (*get_default_buffer_type)(tsr_backend_t backend);

    /* optional async copies; NULL: the buffer's synchronous set/get is used */
    bool (*set_tensor_async)(tsr_backend_t backend, struct tsr_tensor * tensor, const void * data, size_t offset, size_t size);
    bool (*get_tensor_async)(tsr_backend_t backend, const struct tsr_tensor * tensor, void * data, size_t offset, size_t size);
    /* optional, called on the destination's backend: queue src -> dst behind both backends'
     * work; false without an error = not handled (the caller then copies synchronously) */
    bool (*cpy_tensor_async)(tsr_backend_t backend_src, tsr_backend_t backend_dst, const struct tsr_tensor * src, struct tsr_tensor * dst);
    void (*synchronize)(tsr_backend_t backend);                                          /* optional */

    bool            (*graph_reserve)(tsr_backend_t backend, struct tsr_cgraph * cgraph); /* optional */
    enum tsr_status (*graph_compute)(tsr_backend_t backend, struct tsr_cgraph * cgraph); /* returns when the results are ready */
    /* optional: queue the graph and return (results after synchronize); NULL: graph_compute */
    enum tsr_status (*graph_compute_async)(tsr_backend_t backend, struct tsr_cgraph * cgraph);
    bool            (*supports_op)(tsr_backend_t backend, const struct tsr_tensor * op);
    bool            (*supports_buft)(tsr_backend_t backend, tsr_backend_buffer_type_t buft); /* optional: default type only */
    size_t          (*get_workspace_size)(tsr_backend_t backend);                        /* optional */

    /* optional, for a device with events: mark the point the backend's queued work has
     * reached, and make the backend's later work wait for an event (NULL event_wait: the
     * host waits for the event instead, right for a backend that works synchronously) */
    bool (*event_record)(tsr_backend_t backend, tsr_backend_event_t event);
    bool (*event_wait)(tsr_backend_t backend, tsr_backend_event_t event);
};

struct tsr_backend {
    struct tsr_backend_i iface;
    tsr_backend_dev_t    device;   /* what tsr_backend_get_device answers (NULL: none) */
    void *               context;
};

/* ---- devices and backend kinds ------------------------------------------------------- */

struct tsr_backend_device_i {
    const char *              (*get_name)(tsr_backend_dev_t dev);
    const char *              (*get_description)(tsr_backend_dev_t dev);
    void                      (*get_memory)(tsr_backend_dev_t dev, size_t * free, size_t * total);
    enum tsr_backend_dev_type (*get_type)(tsr_backend_dev_t dev);
    /* optional: called with props filled from the other entries (caps from which optional
     * entries are set), to correct or add what they cannot tell (caps.async) */
    void                      (*get_props)(tsr_backend_dev_t dev, struct tsr_backend_dev_props * props);
    tsr_backend_t             (*init_backend)(tsr_backend_dev_t dev, const char * params);  /* NULL + tsr_set_error on failure */
    tsr_backend_buffer_type_t (*get_buffer_type)(tsr_backend_dev_t dev);
    tsr_backend_buffer_type_t (*get_host_buffer_type)(tsr_backend_dev_t dev);                /* optional: none */
    bool                      (*supports_op)(tsr_backend_dev_t dev, const struct tsr_tensor * op);
    bool                      (*supports_buft)(tsr_backend_dev_t dev, tsr_backend_buffer_type_t buft);
    bool                      (*offload_op)(tsr_backend_dev_t dev, const struct tsr_tensor * op);  /* optional: false */
    /* optional: a buffer over caller memory, no copy (NULL + tsr_set_error when refused) */
    tsr_backend_buffer_t      (*buffer_from_host_ptr)(tsr_backend_dev_t dev, void * ptr, size_t size, size_t max_tensor_size);
    /* optional, all three or none: events (tsr_backend_event.context is the device's) */
    tsr_backend_event_t       (*event_new)(tsr_backend_dev_t dev);           /* NULL + tsr_set_error on failure */
    void                      (*event_free)(tsr_backend_dev_t dev, tsr_backend_event_t event);
    void                      (*event_synchronize)(tsr_backend_dev_t dev, tsr_backend_event_t event);
};

struct tsr_backend_event {
    tsr_backend_dev_t device;
    void *            context;
};

struct tsr_backend_device {
    struct tsr_backend_device_i iface;
    tsr_backend_reg_t           reg;
    void *                      context;
};

struct tsr_backend_reg_i {
    const char *      (*get_name)(tsr_backend_reg_t reg);
    size_t            (*get_device_count)(tsr_backend_reg_t reg);
    tsr_backend_dev_t (*get_device)(tsr_backend_reg_t reg, size_t index);  /* index < get_device_count */
};

struct tsr_backend_reg {
    int                      api_version;  /* TSR_BACKEND_API_VERSION of the tables it fills */
    struct tsr_backend_reg_i iface;
    void *                   context;
};

/* Add a backend kind to the registry (the same reg twice is added once). false + error
 * for NULL, an api_version other than TSR_BACKEND_API_VERSION, a nameless reg or a
 * full registry (TSR_BACKEND_MAX_REGS); the registry is then unchanged. */
#define TSR_BACKEND_MAX_REGS 16
TSR_API bool tsr_backend_register(tsr_backend_reg_t reg);

/* ggml's rule for offload_op: moving an op's host-resident weights to a device pays off
 * only from a batch of 32 rows on; GET_ROWS reads a few rows, so it never does. */
static inline bool tsr_backend_offload_by_batch(const struct tsr_tensor * op) {
    const int64_t min_batch = 32;
    return op != NULL && op->op != TSR_OP_GET_ROWS && op->ne[1] >= min_batch;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TESSERA_BACKEND_IMPL_H */
