/* hccl_driver.cpp: one rank of a scenario run against the stand-in HCCL (stub_hccl/), for
 * test_hccl.py: `hccl_driver SCENARIO RANK NRANKS ROOT_FILE`, started once per rank at the
 * same time. Rank 0 makes the root info and leaves it in ROOT_FILE (renamed into place); the
 * others wait for it. test_hccl.py runs the scenarios with $WSP_STUB_STREAMS=sync (each call
 * runs its exchange and returns its result), except "stream" and "count_late" (the default
 * model: the call queues it on the stream). "semantics" prints each collective's result on one line; the other
 * scenarios misuse HCCL in one way and exit with the failing call's HcclResult. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "hccl/hccl.h"

static HcclRootInfo root_info(int rank, const std::string &path) {
    HcclRootInfo info;
    if (rank == 0) {
        if (HcclGetRootInfo(&info) != HCCL_SUCCESS) std::exit(90);
        const std::string tmp = path + ".tmp";
        FILE *f = std::fopen(tmp.c_str(), "wb");
        if (!f || std::fwrite(&info, sizeof info, 1, f) != 1 || std::fclose(f) != 0) std::exit(91);
        if (std::rename(tmp.c_str(), path.c_str()) != 0) std::exit(92);
        return info;
    }
    for (int i = 0; i < 20000; i++) {
        FILE *f = std::fopen(path.c_str(), "rb");
        if (f) {
            const bool ok = std::fread(&info, sizeof info, 1, f) == 1;
            std::fclose(f);
            if (ok) return info;
        }
        usleep(1000);
    }
    std::exit(93);
}

static void print(const char *name, const std::vector<float> &v) {
    std::printf("%s:", name);
    for (float x : v) std::printf(" %g", x);
    std::printf("\n");
}

#define CHECK(call) do { HcclResult r_ = (call); if (r_ != HCCL_SUCCESS) { \
    std::printf("%s -> %d\n", #call, (int)r_); return (int)r_; } } while (0)

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    const std::string scenario = argv[1];
    const int rank = std::atoi(argv[2]), n = std::atoi(argv[3]);
    HcclRootInfo info = root_info(rank, argv[4]);
    HcclComm comm = nullptr;
    aclrtStream stream = nullptr;
    if (scenario == "before_device") {
        CHECK(HcclCommInitRootInfo((uint32_t)n, &info, (uint32_t)rank, &comm));
        return 0;
    }
    if (aclrtSetDevice(0) != ACL_SUCCESS) return 94;
    if (scenario != "other_stream" && aclrtCreateStream(&stream) != ACL_SUCCESS) return 95;
    if (scenario == "uninitialised") {
        std::vector<float> x(8, 1.0f), y(8);
        CHECK(HcclAllReduce(x.data(), y.data(), 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
                            (HcclComm)&x, stream));
        return 0;
    }
    CHECK(HcclCommInitRootInfo((uint32_t)n, &info, (uint32_t)rank, &comm));
    std::vector<float> x(8), y(8 * n);
    for (int i = 0; i < 8; i++) x[i] = (float)(i * (rank + 1) + rank);
    if (scenario == "semantics") {
        std::vector<float> out(8);
        CHECK(HcclAllReduce(x.data(), out.data(), 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
        print("allreduce", out);
        CHECK(HcclAllReduce(x.data(), out.data(), 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, comm, stream));
        print("max", out);
        CHECK(HcclAllGather(x.data(), y.data(), 8, HCCL_DATA_TYPE_FP32, comm, stream));
        print("allgather", y);
        std::vector<float> part(8 / n);
        CHECK(HcclReduceScatter(x.data(), part.data(), (uint64_t)(8 / n), HCCL_DATA_TYPE_FP32,
                                HCCL_REDUCE_SUM, comm, stream));
        print("reduce_scatter", part);
        CHECK(HcclAlltoAll(x.data(), (uint64_t)(8 / n), HCCL_DATA_TYPE_FP32, out.data(),
                           (uint64_t)(8 / n), HCCL_DATA_TYPE_FP32, comm, stream));
        print("alltoall", out);
    } else if (scenario == "stream") {  /* the default stream model: the call only queues */
        std::vector<float> out(8, -1.0f);
        CHECK(HcclAllReduce(x.data(), out.data(), 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
        print("queued", out);
        if (aclrtSynchronizeStream(stream) != ACL_SUCCESS) return 98;
        print("allreduce", out);
    } else if (scenario == "count_late") {  /* a disagreement found on the stream */
        CHECK(HcclAllReduce(x.data(), y.data(), rank == 0 ? 8 : 4, HCCL_DATA_TYPE_FP32,
                            HCCL_REDUCE_SUM, comm, stream));
        const aclError e = aclrtSynchronizeStream(stream);
        std::printf("aclrtSynchronizeStream -> %d\n", (int)e);
        return e == ACL_SUCCESS ? 0 : 1;
    } else if (scenario == "count") {
        CHECK(HcclAllReduce(x.data(), y.data(), rank == 0 ? 8 : 4, HCCL_DATA_TYPE_FP32,
                            HCCL_REDUCE_SUM, comm, stream));
    } else if (scenario == "dtype") {
        CHECK(HcclAllGather(x.data(), y.data(), 8, rank == 0 ? HCCL_DATA_TYPE_FP32 : HCCL_DATA_TYPE_INT32,
                            comm, stream));
    } else if (scenario == "other_stream") {
        if (aclrtSetDevice(7) != ACL_SUCCESS || aclrtCreateStream(&stream) != ACL_SUCCESS) return 96;
        CHECK(HcclAllReduce(x.data(), y.data(), 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    } else if (scenario == "destroy_twice") {
        CHECK(HcclCommDestroy(comm));
        CHECK(HcclCommDestroy(comm));
    } else if (scenario == "reset_live") {
        std::printf("aclrtResetDevice -> %d\n", (int)aclrtResetDevice(0));
        return 0;
    } else if (scenario == "absent") {
        if (rank != 0) return 0;  /* never arrives at the collective */
        CHECK(HcclAllReduce(x.data(), y.data(), 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    } else {
        return 2;
    }
    CHECK(HcclCommDestroy(comm));
    return aclrtResetDevice(0) == ACL_SUCCESS ? 0 : 97;
}
