#pragma once
// The spec error code a registry call throws, for CHECKs.
#include <catch2/catch.hpp>
#include <functional>

#include "berth/oci/error.hpp"

inline berth::oci::ErrorCode code_of(const std::function<void()>& call) {
    try {
        call();
    } catch (const berth::oci::Error& error) {
        return error.code();
    }
    FAIL("expected an oci::Error");
    return berth::oci::ErrorCode::internal;
}
