/* error.inl - thread-local error messages and the error callback. */

TSR_IMPL_NS_BEGIN
static thread_local char g_error[1024] = {0};
static tsr_error_callback g_error_cb = nullptr;
static void * g_error_cb_user = nullptr;
TSR_IMPL_NS_END

TSR_API_IMPL const char * tsr_status_to_string(enum tsr_status status) {
    switch (status) {
        case TSR_STATUS_ALLOC_FAILED: return "ALLOC_FAILED";
        case TSR_STATUS_FAILED:       return "FAILED";
        case TSR_STATUS_SUCCESS:      return "SUCCESS";
        case TSR_STATUS_ABORTED:      return "ABORTED";
    }
    return "UNKNOWN";
}

TSR_API_IMPL const char * tsr_last_error(void) { return tsr_impl::g_error; }

TSR_API_IMPL void tsr_clear_error(void) { tsr_impl::g_error[0] = '\0'; }

TSR_API_IMPL void tsr_set_error_callback(tsr_error_callback cb, void * user_data) {
    tsr_impl::g_error_cb = cb;
    tsr_impl::g_error_cb_user = user_data;
}

TSR_API_IMPL bool tsr_set_error(const char * fmt, ...) {
    char buf[sizeof(tsr_impl::g_error)];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt ? fmt : "(null)", args);
    va_end(args);
    if (n < 0) {
        snprintf(buf, sizeof(buf), "tessera: error (message could not be formatted)");
    }
    memcpy(tsr_impl::g_error, buf, sizeof(buf));
    if (tsr_impl::g_error_cb) {
        tsr_impl::g_error_cb(tsr_impl::g_error, tsr_impl::g_error_cb_user);
    }
    return false;
}
